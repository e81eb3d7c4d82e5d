"""Calls into the extension as a Python user expects them to behave.

pybind11 takes a path only as `str`, and answers a keyword it does not know, or an argument of the
wrong type, with its "incompatible function arguments" dump of every overload's signature. Each
public function, constructor and method of the module is wrapped here, once, at import:
  - an os.PathLike argument (pathlib.Path, ...) is passed on as its str (os.fspath);
  - a model given as bytes is refused in words (ortfleet opens models by path: its workers and cache
    do), or, where the bytes are a path (no NUL, as os functions take them), passed on decoded;
  - a str holding a NUL byte is refused (C++ would cut the path or name there);
  - an unknown keyword is named with the closest one the call takes ("did you mean 'devices'?");
  - a wrong type names the argument, what it takes and what it got, as a TypeError of one line.
The names and types a call takes are read from the signature pybind11 writes as the first line of
its docstring, so that the bindings (python/*.cpp) stay the one place that declares them.
"""
import difflib
import functools
import os

# The first byte of a serialized ONNX ModelProto: field 1 (ir_version), a varint.
_MODEL_PROTO_START = b"\x08"


def _split_top_level(text):
    """`text` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


class _Signature:
    """What one binding takes: its parameters in order, which are keyword-only, which are required,
    and each one's type as pybind11 writes it ("str", "Optional[float]", "object")."""

    def __init__(self, fn):
        doc = (getattr(fn, "__doc__", None) or "").lstrip()
        first = doc.split("\n", 1)[0]
        self.names, self.keyword_only, self.required, self.types = [], set(), set(), {}
        self.known = "(" in first and not doc.startswith("Overloaded function")
        if not self.known:
            return
        depth, end = 0, None
        for i, c in enumerate(first[first.index("("):], start=first.index("(")):
            depth += c == "("
            depth -= c == ")"
            if depth == 0:
                end = i
                break
        keyword_only = False
        for part in _split_top_level(first[first.index("(") + 1:end]):
            if part == "*":
                keyword_only = True
                continue
            if part == "/":
                continue
            name, _, rest = part.partition(":")
            name = name.strip()
            if name == "self":
                continue
            annotation, has_default, _ = rest.partition("=")
            self.names.append(name)
            self.types[name] = annotation.strip()
            if keyword_only:
                self.keyword_only.add(name)
            if not has_default:
                self.required.add(name)

    @property
    def positional(self):
        return [n for n in self.names if n not in self.keyword_only]


def _type_name(value):
    return type(value).__name__


def _short_repr(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fits(value, annotation):
    """Whether `value` is what pybind11 takes for `annotation`; None where that cannot be told."""
    optional = annotation.startswith("Optional[") or annotation.endswith("| None")
    base = annotation[len("Optional["):-1] if annotation.startswith("Optional[") else annotation.replace("| None", "").strip()
    if value is None:
        return optional or base == "object"
    checks = {
        "str": lambda v: isinstance(v, (str, bytes)),  # bytes: a path as path_argument hands it on
        "int": lambda v: hasattr(v, "__index__") and not isinstance(v, float),
        "float": lambda v: isinstance(v, (int, float)) or hasattr(v, "__float__"),
        "bool": lambda v: isinstance(v, bool) or type(v).__name__ == "bool_",
        "dict": lambda v: isinstance(v, dict),
        "object": lambda v: True,
    }
    check = checks.get(base)
    return check(value) if check else None


def _takes(annotation):
    """What a parameter of this type takes, in words."""
    base = annotation[len("Optional["):-1] if annotation.startswith("Optional[") else annotation.replace("| None", "").strip()
    words = {"str": "a str", "int": "an int", "float": "a number", "bool": "True or False", "dict": "a dict"}.get(base, base)
    if base == "str":
        words = "a str (or an os.PathLike, where it is a path)"
    return words + (" or None" if annotation.startswith("Optional[") or annotation.endswith("| None") else "")


class _Call:
    """One wrapped binding: `shown` is how errors name it ("Fleet()", "Fleet.run()")."""

    def __init__(self, fn, shown):
        self.fn, self.shown, self.signature = fn, shown, _Signature(fn)

    def path_argument(self, name, value):
        """`value` as the binding takes a path: os.PathLike as its str; a str that is not UTF-8 (a file
        name in another encoding, held by Python as surrogates) as its bytes, which pybind11 passes on
        unchanged; bytes as a path where they can be one."""
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            if "\0" in value:  # C++ would cut it there: a path, or any name, silently shorter
                from ._ortfleet import Error  # noqa: PLC0415  (loaded before any call is wrapped)
                raise Error(f"{self.shown}: {name} holds a NUL byte, which no path or name holds: {_short_repr(value)}")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return os.fsencode(value)
            return value
        annotation = self.signature.types.get(name, "")
        if not isinstance(value, (bytes, bytearray, memoryview)) or annotation not in ("str", "object"):
            return value
        data = bytes(value)
        if name == "model" and (b"\0" in data or data.startswith(_MODEL_PROTO_START) or len(data) > 4096):
            from ._ortfleet import Error  # noqa: PLC0415  (loaded before any call is wrapped)
            raise Error(f"{self.shown}: model was given as {len(data)} bytes, which look like a model's contents; ortfleet "
                        "takes the path of an .onnx file (its workers and its cache open the model by path). Write the bytes "
                        "to a file first, e.g. pathlib.Path('model.onnx').write_bytes(data), and pass that path")
        if b"\0" in data:
            raise TypeError(f"{self.shown}: {name} takes a path, and a path holds no NUL byte: {_short_repr(value)}")
        return data if annotation == "str" else os.fsdecode(data)

    def check_keywords(self, kwargs):
        sig = self.signature
        for name in kwargs:
            if name in sig.names:
                continue
            close = difflib.get_close_matches(name, sig.names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; it takes: {', '.join(sig.names) or 'no arguments'}"
            raise TypeError(f"{self.shown} got an unexpected keyword argument {name!r}{hint}")

    def explain(self, args, kwargs):
        """The one line that says what does not fit, for a call pybind11 refused."""
        sig = self.signature
        positional = sig.positional
        if len(args) > len(positional):
            named = ", ".join(positional) or "none"
            return (f"{self.shown} takes {len(positional)} positional argument{'s' if len(positional) != 1 else ''} ({named}), "
                    f"{len(args)} given; pass the others by keyword (e.g. {sig.names[len(positional)] if len(sig.names) > len(positional) else 'name'}=...)")
        given = dict(zip(positional, args))
        for name, value in kwargs.items():
            if name in given:
                return f"{self.shown} got {name!r} twice: by position and by keyword"
            given[name] = value
        missing = [n for n in sig.names if n in sig.required and n not in given]
        if missing:
            return f"{self.shown} is missing its argument {missing[0]!r} ({_takes(sig.types[missing[0]])})"
        for name, value in given.items():
            if _fits(value, sig.types.get(name, "")) is False:
                return f"{self.shown}: {name} takes {_takes(sig.types[name])}, not {_type_name(value)} ({_short_repr(value)})"
        kinds = ", ".join(f"{n}={_type_name(v)}" for n, v in given.items())
        return f"{self.shown}: these arguments do not fit it: {kinds or 'none'} (help(ortfleet) lists what each takes)"

    def __call__(self, leading, args, kwargs):
        """Calls the binding: `leading` (a method's self) passes through; `args` and `kwargs` are checked."""
        if not self.signature.known:
            return self.fn(*leading, *args, **kwargs)
        if kwargs:
            self.check_keywords(kwargs)
        names = self.signature.positional
        args = tuple(self.path_argument(names[i] if i < len(names) else "", a) for i, a in enumerate(args))
        kwargs = {k: self.path_argument(k, v) for k, v in kwargs.items()}
        # A binding that reads its keywords itself (Fleet: its signature is the settings table's) never says
        # "incompatible": a value of the wrong type is named here, the same way.
        given = {**dict(zip(names, args)), **kwargs}
        if any(_fits(value, self.signature.types.get(name, "")) is False for name, value in given.items()):
            raise TypeError(self.explain(args, kwargs))
        try:
            return self.fn(*leading, *args, **kwargs)
        except TypeError as e:
            if "incompatible" not in str(e):
                raise
            raise TypeError(self.explain(args, kwargs)) from None


def _wrap_function(fn, shown):
    call = _Call(fn, shown)

    @functools.wraps(fn)
    def function(*args, **kwargs):
        return call((), args, kwargs)

    return function


def _wrap_method(fn, shown):
    call = _Call(fn, shown)

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        return call((self,), args, kwargs)

    return method


def checked(namespace, functions, classes):
    """Wraps, in `namespace` (the package's globals), each of `functions` and the constructor and
    public methods of each of `classes`."""
    for name in functions:
        namespace[name] = _wrap_function(namespace[name], f"ortfleet.{name}()")
    for name in classes:
        cls = namespace[name]
        for attr, value in list(vars(cls).items()):
            if attr != "__init__" and (attr.startswith("_") or isinstance(value, property) or not callable(value)):
                continue
            shown = f"{name}()" if attr == "__init__" else f"{name}.{attr}()"
            setattr(cls, attr, _wrap_method(value, shown))
