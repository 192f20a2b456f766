"""The ``light-llm`` entry point: every subcommand is registered and has --help."""

import subprocess
import sys

import pytest

from light_llm.cli import COMMANDS, build_parser, main


def test_every_command_module_registers_its_subcommand():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert sorted(subparsers.choices) == sorted(name.replace("_", "-") for name in COMMANDS)


@pytest.mark.parametrize("command", [name.replace("_", "-") for name in COMMANDS])
def test_help_of_every_command(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert f"light-llm {command}" in capsys.readouterr().out


def test_no_command_prints_help_and_the_module_runs_as_a_script():
    done = subprocess.run(
        [sys.executable, "-m", "light_llm"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "COMMAND" in done.stdout


@pytest.mark.parametrize(
    ("argv", "option", "value"),
    [
        (["train", "--time", "-5s"], "--time", "-5s"),
        (["generate", "--checkpoint", "run", "--prompt", "-hi"], "--prompt", "-hi"),
    ],
)
def test_a_value_taken_for_an_option_is_one_line_that_says_how_to_write_it(
    capsys, argv, option, value
):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"argument {option}: expected one argument" in err
    assert f"a value that starts with '-' is written {option}=VALUE" in err
    # and the spelling it gives is read as the value
    written = build_parser().parse_args([*argv[:-2], f"{option}={value}"])
    assert getattr(written, option.removeprefix("--")) in (value, [value])  # (--prompt repeats)


@pytest.mark.parametrize(
    ("argv", "prog", "hint"),
    [
        (
            ["inspect", "heads", "--checkpoint", "run", "--tokens", "0"],
            "light-llm inspect",
            "--token",
        ),
        (
            ["generate", "--checkpoint", "run", "--prompt", "a", "--temprature", "0.5"],
            "light-llm generate",
            "--temperature",
        ),
        (
            ["tokenizer", "train", "--data", "f", "--out", "d", "--vocab-sise", "9"],
            "light-llm tokenizer train",
            "--vocab-size",
        ),
        (["train", "--max-iters", "5", "extra"], "light-llm train", None),
        (["--bogus"], "light-llm", None),
    ],
)
def test_an_unknown_option_is_told_by_its_command_with_the_nearest_option(capsys, argv, prog, hint):
    """The command whose options were given says so and points to its own --help (not the top
    parser's), naming the option it nearly spells where there is one."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"{prog}: error: unrecognized arguments: ")
    assert err.rstrip().endswith(f"(see {prog} --help).")
    if hint:
        assert f"did you mean {hint}?" in err
    else:
        assert "did you mean" not in err


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("top_k must be an integer of at least 1, got 0.", "--top-k must be an integer of"),
        ("max_new_tokens must be 0 or more, got -3.", "--max-new-tokens must be 0 or more"),
        ("top_k of 3 is fine, but", "top_k of 3 is fine, but"),  # not a setting's refusal
        ("n_layer must be positive.", "n_layer must be positive."),  # not generate's option
    ],
)
def test_an_api_refusal_names_the_commands_flag(message, said):
    """The sentence the Python API raises names its keyword; the command line names the flag
    of the command that was run, where that command has one."""
    from light_llm.cli import command_parser, named_by_flag

    parser = build_parser()
    args = parser.parse_args(["generate", "--checkpoint", "run", "--prompt", "a"])
    assert named_by_flag(command_parser(parser, args), message).startswith(said)
