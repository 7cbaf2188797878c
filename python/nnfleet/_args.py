"""Argument checks: each bad argument a UsageError or DataError naming the keyword, the rule
and what was expected, never a raw TypeError or ValueError; engine messages in Python's words."""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import re
import reprlib
import warnings

import numpy as np

from ._core import DataError, Error, UsageError


_INT32_MAX = 2**31 - 1
_FLOAT32_MAX = 3.4028234663852886e38
_MAX_DEPTH = 100  # nesting of plan values (the plan reader allows 128 with its own levels)
_MAX_PATH = 4096
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 40
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4
_repr.maxlevel = 3
_repr.maxlong = 24


def _show(v):
    """`v` as a message quotes it: its type and a short form, never a whole plan or array."""
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape} and dtype {v.dtype}"
    try:
        text = _repr.repr(v)
    except Exception:  # a repr that raises says nothing more
        text = "..."
    return f"{type(v).__name__} {text[:80]}"


def _fail(call, name, rule, expected, got, cls=None):
    raise (cls or UsageError)(f"failed to {call}: {name} {rule}; expected {expected}, "
                              f"got {_show(got)}")


def _int(v, name, call, lo=1, hi=_INT32_MAX):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        _fail(call, name, "must be an integer", f"an int from {lo} to {hi}", v)
    if not lo <= int(v) <= hi:
        _fail(call, name, "is out of range", f"an int from {lo} to {hi}", v)
    return int(v)


def _int_from(v, name, call, lo, why="", hi=_INT32_MAX):
    """_int, with a value below `lo` refused by the rule "must be at least lo" (and `why`)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v < lo:
        _fail(call, name, f"must be at least {lo}{why}", f"an int from {lo} to {hi}", v)
    return _int(v, name, call, lo=lo, hi=hi)


def _float(v, name, call, lo=-_FLOAT32_MAX, hi=_FLOAT32_MAX, hi_open=False):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        _fail(call, name, "must be a number", f"a finite number from {lo:g} to {hi:g}", v)
    f = float(v) if not isinstance(v, int) or abs(v) < 2**1000 else math.inf
    if not (math.isfinite(f) and lo <= f and (f < hi if hi_open else f <= hi)):
        _fail(call, name, "is out of range",
              f"a finite number from {lo:g} to {hi:g}{' (excluded)' if hi_open else ''}", v)
    return f


def _text(v, name, call, choices=None, max_len=1000):
    if not isinstance(v, str):
        _fail(call, name, "must be a string", " or ".join(choices) if choices else "a str", v)
    if choices and v not in choices:
        _fail(call, name, "is not a known value", "one of " + ", ".join(choices), v)
    if len(v) > max_len or "\0" in v:
        _fail(call, name, f"must be at most {max_len} characters without NUL", "a short name", v)
    return v


def _path(v, name, call):
    if isinstance(v, os.PathLike):
        try:
            v = os.fspath(v)
        except Exception:
            v = None
    if not isinstance(v, str) or not v or "\0" in v or len(v) > _MAX_PATH:
        _fail(call, name, "must be a file or folder path",
              f"a non-empty str or os.PathLike of at most {_MAX_PATH} characters without NUL", v)
    return v


def _flag(v, name, call):
    if not isinstance(v, (bool, np.bool_)):
        _fail(call, name, "must be True or False", "a bool", v)
    return bool(v)


def _plain(v, where, call, depth=0, path=()):
    """`v` as plan JSON takes it: dicts with str keys, lists, str, finite numbers, bool, None;
    numpy scalars become Python ones. Cycles, depth and other types are refused by name."""
    if depth > _MAX_DEPTH:
        _fail(call, where, f"is nested more than {_MAX_DEPTH} levels deep",
              "a plan value of reasonable depth", "")
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            _fail(call, where, "holds a non-finite number", "finite numbers in plan values", v)
        return v
    if isinstance(v, (dict, list, tuple)):
        if any(v is p for p in path):
            _fail(call, where, "contains itself (a reference cycle)", "a tree of plan values", v)
        path = path + (v,)
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    _fail(call, where, "has a key that is not a string", "str keys", k)
                out[k] = _plain(x, f"{where}[{_repr.repr(k)}]", call, depth + 1, path)
            return out
        return [_plain(x, f"{where}[{i}]", call, depth + 1, path) for i, x in enumerate(v)]
    _fail(call, where, "is not a plan value", "numbers, strings, lists and dicts", v)


# Engine messages name the CLI's options; Python callers use keywords.
_CLI_WORDS = [
    (re.compile(r" \(nnfleet train: --out FOLDER\)"), ""),
    (re.compile(r"--resume\b"), "resume=True"),
    (re.compile(r"--out FOLDER\b"), "out=FOLDER"),
    (re.compile(r"--out\b"), "out="),
    (re.compile(r"--workers\b"), "workers="),
    (re.compile(r"--format\b"), "format="),
]
_LONG_WORD = re.compile(r"[^\s']{200,}")


def _for_python(msg):
    for pattern, words in _CLI_WORDS:
        msg = pattern.sub(words, msg)
    # A value quoted whole (a long name or string) is abbreviated.
    return _LONG_WORD.sub(lambda m: f"{m.group(0)[:60]}...({len(m.group(0))} characters)", msg)


@contextlib.contextmanager
def _engine():
    """Engine errors as Python callers read them (_for_python)."""
    try:
        yield
    except Error as e:
        msg = _for_python(str(e))
        if msg == str(e):
            raise
        raise type(e)(msg) from None

# NumPy dtypes the engine reads in place; every other dtype is converted once (with a warning).
_IN_PLACE = (np.uint8, np.int32, np.int64, np.float32, np.float64)


def _array(a, what):
    """`a` as an array the engine reads in place, converted once (with a warning) if needed."""
    if (isinstance(a, np.ndarray) and a.dtype.type in _IN_PLACE and a.dtype.isnative
            and a.flags.c_contiguous):
        return a
    if a is None:
        raise DataError(f"failed to read {what}: it is None; expected a numeric array")
    try:
        arr = np.asarray(a)
    except Exception as e:  # ragged nested lists, objects NumPy cannot read
        raise DataError(f"failed to read {what}: NumPy cannot make an array of it "
                        f"({str(e)[:100]}); expected a numeric array, got {_show(a)}") from None
    if arr.ndim == 0 or arr.size == 0:
        raise DataError(f"failed to read {what}: it holds no samples; expected an array with a "
                        f"first (sample) axis and at least one value, got {_show(arr)}")
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(arr.reshape(-1) > np.iinfo(np.int64).max))
        raise DataError(f"failed to read {what}: value {arr.reshape(-1)[i]} at flat index {i} "
                        f"does not fit int64; expected uint64 values up to 2^63-1")
    if arr.dtype.kind == "O" and all(isinstance(v, str) for v in arr.reshape(-1)):
        arr = arr.astype(str)  # a list of str NumPy kept as objects
    if arr.dtype.kind == "U":  # text for a string input (TextVectorization): read as strings
        return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    if arr.dtype.type in _IN_PLACE:
        target = arr.dtype.newbyteorder("=")
    elif arr.dtype.kind in "biu":
        target = np.int64 if arr.dtype.kind != "b" else np.uint8
    elif arr.dtype.kind == "f":
        target = np.float32
    else:
        raise DataError(f"failed to read {what}: unsupported dtype '{arr.dtype}'; expected a "
                        "numeric array (uint8, int32, int64, float32 or float64)")
    out = np.ascontiguousarray(arr, dtype=target)
    if out is not a:
        reason = [] if arr.flags.c_contiguous else ["a layout that is not C-contiguous"]
        if arr.dtype != out.dtype:
            reason.insert(0, f"dtype {arr.dtype}")
        if not isinstance(a, np.ndarray):
            reason = [f"a {type(a).__name__}"]
        warnings.warn(f"nnfleet: {what} has {' and '.join(reason)}; converted once to a "
                      f"C-contiguous {out.dtype} copy ({out.nbytes / 1e6:.1f} MB)", stacklevel=3)
    return out


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    raise UsageError(f"failed to write the plan: {type(v).__name__} is not a plan value; "
                     "expected numbers, strings, lists and dicts")


def _did_you_mean(word, valid):
    """" (did you mean 'epochs'?)" for a near miss among `valid`, else ""."""
    close = difflib.get_close_matches(str(word), list(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _several(v, what, names, call):
    """`v` as the arrays of a model's inputs (or outputs) in its order, as Keras takes them: a
    dict keyed by name (`names`: the model's, None when unknown), a list or tuple of arrays in
    the model's order, or one array (a nested list of numbers is one array, never several)."""
    if isinstance(v, dict):
        if not names:
            _fail(call, what, "is a dict keyed by input or output name, but the model does not "
                  "name its inputs and outputs", "a list in the model's order, or one array", v)
        for k in v:
            if k not in names:
                _fail(call, what, f"has a key that names no input or output{_did_you_mean(k, names)}",
                      "keys among " + ", ".join(map(repr, names)), k)
        missing = [n for n in names if n not in v]
        if missing:
            _fail(call, what, f"gives no array for {', '.join(map(repr, missing))}",
                  "one array per name: " + ", ".join(map(repr, names)), v)
        return [_array(v[n], f"{what}[{n!r}]") for n in names]
    several = isinstance(v, (list, tuple)) and bool(v) and (
        all(isinstance(a, np.ndarray) for a in v) or (names is not None and len(names) > 1))
    if several:
        return [_array(a, f"{what}[{i}]") for i, a in enumerate(v)]
    return [_array(v, what)]


# Plan fields of a Python call's invisible plan, in the words of the call's keywords.
_PLAN_FIELD = re.compile(r"nnfleet\.(?:train|search):\d+: ?([^\s:]*)(:?)")
_DATA_WORDS = {"train.x": "x", "train.y": "y", "train.sample_weight": "sample_weight",
               "train": "x and y", "validation": "validation_data", "test": "test_data"}


def _field_words(path, models):
    """"models[3].layers[1].Dense.units" -> "models[3] ('mlp-2') layers[1].Dense.units" (models:
    the (index in the call's models, name) of each plan entry);
    "defaults.epochs" -> "keyword epochs"; "data.validation.x" -> "validation_data x"."""
    m = re.match(r"models\[(\d+)\](?:\.(.*))?$", path)
    if m:
        i, rest = int(m.group(1)), m.group(2)
        index, name = models[i] if i < len(models) else (i, None)
        named = f" ({name!r})" if name else ""
        return f"models[{index}]{named}" + (f" {_data_words(rest)}" if rest else "")
    if path.startswith("search.space."):
        name, _, rest = path[len("search.space."):].partition(".")
        return f"space_or_build[{name!r}]" + (f".{rest}" if rest else "")
    if path.startswith("search.scheduler."):  # search.scheduler.<kind>.<keyword>
        return "keyword " + path.rsplit(".", 1)[-1]
    for section in ("defaults.", "search."):
        if path.startswith(section):
            return "keyword " + path[len(section):]
    if path.startswith("data"):
        return _data_words(path)
    return "keyword " + path if path else "the arguments"


def _data_words(path):
    if not path.startswith("data"):
        return path
    rest = path[len("data."):] if path.startswith("data.") else ""
    for field, words in sorted(_DATA_WORDS.items(), key=lambda kv: -len(kv[0])):
        if rest == field or rest.startswith(field + ".") or rest.startswith(field + "["):
            return words + rest[len(field):]
    return "keyword " + rest if rest else "x and y"


# The keys _train._source gives arrays: x.0, y[s01].1, w:validation, x[s01]:test.0, ...
_ARRAY_KEY = re.compile(r"\{array: ([xyw])(\[[^\]{}]*\])?(?::(validation|test))?(?:\.(\d+))?\}")


def _array_words(m):
    letter, key, part, index = m.groups()
    words = {"x": "x", "y": "y", "w": "sample_weight"}[letter]
    if index and index != "0":
        words += f"[{index}]"
    if part:
        words = f"{part}_data's {words}"
    return f"data[{key[1:-1]!r}]'s {words}" if key else words


def _plan_words(msg, call, models):
    """An engine message about the plan a Python call built, with its fields named as the call's
    keywords and models (index and name), never by lines of a plan the caller never saw."""
    msg = re.sub(r"failed to (?:load|validate) plan 'nnfleet\.(?:train|search)': (\d+) "
                 r"(problem\(s\)|problems?)",
                 lambda m: f"failed to {call}: {m.group(1)} {m.group(2)} with the arguments", msg)
    msg = msg.replace("(validation metrics need data.validation_split > 0)",
                      "(validation metrics need validation_split > 0 or validation_data)")
    msg = _PLAN_FIELD.sub(lambda m: _field_words(m.group(1), models) + m.group(2), msg)
    msg = _ARRAY_KEY.sub(_array_words, msg)
    # "models[0] ('mlp'): model 'mlp': ..." names the model once.
    return re.sub(r"(\('([^'\n]*)'\):) model '\2':", r"\1", msg)


@contextlib.contextmanager
def _python_call(call, models):
    """Errors of the engine about a Python call's plan, in _plan_words's words."""
    try:
        yield
    except Error as e:
        msg = _plan_words(str(e), call, models)
        if msg == str(e):
            raise
        raise type(e)(msg) from None
