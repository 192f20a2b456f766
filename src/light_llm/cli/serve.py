"""``light-llm serve``: the explorer, a local web page that shows a model's numbers live."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from light_llm.errors import ConfigError, reason

LISTEN_BACKLOG = 2048  # uvicorn's default

DESCRIPTION = """\
Serve the explorer: a web page, on this machine, that shows a model thinking. For a GPT: the
prompt's tokens, the next-token distribution under temperature, top-k and top-p (seed 000
§8), the attention of every layer and head, a streamed generation coloured by probability,
and the model card (config, training, loss curve). For an encoder: attention, fill-mask and
sentence similarity. Every worked example of `light-llm explain` is a page too, and a JSON API
under /api serves programs (docs/explorer.md).

Without --checkpoint it serves the newest training run under the current folder, else the small
GPT run that ships with light-llm (its slider replays its learning), else the packaged MiniLM
encoder; with --encoder, the newest masked-LM encoder run here, else the small encoder that
ships with light-llm. Everything the page needs ships with light-llm: it works offline.
"""

EXAMPLES = """\
examples:
  light-llm serve                                   newest run here, or the shipped one
  light-llm serve --encoder                         an encoder: fill-mask, similarity
  light-llm serve --checkpoint out-light-llm --open
  light-llm serve --checkpoint out-bert --port 8001
  light-llm serve --checkpoint out-light-llm --compare out-nanogpt
                                                    two runs' learning side by side
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="a local web page that shows a model thinking (attention, next token, generation)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="a light-llm checkpoint (GPT or encoder), a training output folder, or a "
        "HuggingFace GPT-2 or BERT folder (default: the newest run here, else the one that "
        "ships with light-llm)",
    )
    parser.add_argument(
        "--encoder",
        action="store_true",
        help="serve a masked-LM encoder: the newest encoder run here, else the one that ships "
        "with light-llm",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="training run folders (--out) whose curves and probes are shown beside the "
        "served run's, at the same iteration",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="port to listen on (default 8000; 0: any free one)"
    )
    parser.add_argument(
        "--open", action="store_true", help="open the page in the default web browser"
    )
    parser.add_argument(  # train --serve's explorer: it ends with the command, even killed
        "--end-with-stdin", action="store_true", help=argparse.SUPPRESS
    )
    parser.set_defaults(func=run)


def listening_socket(host: str, port: int, flag: str = "--port") -> socket.socket:
    """A socket listening on ``host``:``port``, ready to hand to uvicorn; ConfigError in one
    sentence when the port is taken or the address is not this machine's (``flag`` names the
    option that gave the port)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"{flag} must be between 0 and 65535, got {port}.")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        raise ConfigError(f"--host {host!r} is not an address this machine knows.") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use: stop what uses it or pick "
                f"another with {flag}."
            ) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {reason(exc)}.") from None
    sock.listen(LISTEN_BACKLOG)  # a browser opened at once waits in the queue, not refused
    return sock


def run(args: argparse.Namespace) -> int:
    if args.end_with_stdin:
        end_when_stdin_closes()
    sock = listening_socket(args.host, args.port)  # before the slow loading
    warn_if_exposed(args.host)
    try:
        return serve(args, sock)
    finally:
        sock.close()


def end_when_stdin_closes() -> None:
    """End this process as SIGTERM does (uvicorn's shutdown once it serves) when standard
    input reaches its end: ``train --serve`` hands its explorer a pipe that closes when the
    command ends, however it ends (kill -9 too), so that the explorer is never orphaned."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="end-with-stdin").start()


def warn_if_exposed(host: str) -> None:
    """One line on stderr when ``host`` is not this machine only: the API has no password."""
    from light_llm.serve.guard import is_loopback

    if not is_loopback(host):
        print(
            f"warning: --host {host} serves the explorer's API, which has no password, to "
            "every machine that can reach this one; use --host 127.0.0.1 unless you mean it.",
            file=sys.stderr,
            flush=True,
        )


def serve(args: argparse.Namespace, sock: socket.socket) -> int:
    import uvicorn

    from light_llm.checkpoints.discovery import default_encoder
    from light_llm.serve import ExplorerModel, create_app, default_model
    from light_llm.serve.history import RunHistory

    compared = [RunHistory(folder) for folder in args.compare or ()]
    if args.checkpoint is not None and args.encoder:
        raise ConfigError("give --checkpoint DIR or --encoder, not both.")
    if args.checkpoint is not None:
        folder, origin = args.checkpoint, f"--checkpoint {args.checkpoint}"
    elif args.encoder:
        folder, origin = default_encoder(Path.cwd())
    else:
        folder, origin = default_model(Path.cwd())
    explorer = ExplorerModel(folder, origin)
    app = create_app(explorer, compared, host=args.host)  # a run given twice is refused here
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/"
    print(f"serving {explorer.kind} {explorer.folder} ({origin})")
    print(f"open {url} (Ctrl-C stops)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        # SIGTERM, Ctrl-C: stop at once, cutting open streams after 0.1 s (at 0, uvicorn said
        # "ERROR: Cancel 0 running task(s)" at every stop, none open or not)
        timeout_graceful_shutdown=0.1,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0
