"""Run Lua 5.1 code in-process through ctypes (Slurm 22.05 links liblua5.1).

Test helper only: loads a chunk, calls it, returns its first result as text.
"""

from __future__ import annotations

import ctypes
import ctypes.util

LUA_GLOBALSINDEX = -10002


def load_library() -> ctypes.CDLL | None:
    for name in ("liblua5.1.so.0", ctypes.util.find_library("lua5.1")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def run(lib: ctypes.CDLL, chunk: str) -> str:
    """Execute ``chunk`` (which must ``return`` a string) in a fresh state."""
    lib.luaL_newstate.restype = ctypes.c_void_p
    lib.luaL_openlibs.argtypes = [ctypes.c_void_p]
    lib.luaL_loadstring.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.lua_pcall.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.lua_tolstring.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.lua_tolstring.restype = ctypes.c_char_p
    lib.lua_close.argtypes = [ctypes.c_void_p]
    state = lib.luaL_newstate()
    try:
        lib.luaL_openlibs(state)
        if lib.luaL_loadstring(state, chunk.encode()) != 0:
            raise RuntimeError(f"lua load: {lib.lua_tolstring(state, -1, None)!r}")
        if lib.lua_pcall(state, 0, 1, 0) != 0:
            raise RuntimeError(f"lua run: {lib.lua_tolstring(state, -1, None)!r}")
        out = lib.lua_tolstring(state, -1, None)
        return "" if out is None else out.decode()
    finally:
        lib.lua_close(state)
