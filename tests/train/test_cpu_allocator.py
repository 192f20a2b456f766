import platform
import sys

from light_llm.train.cpu_allocator import keep_freed_memory


def test_the_allocator_settings_apply_exactly_where_glibc_is():
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is on_glibc
