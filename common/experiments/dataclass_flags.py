"""Flags from frozen config dataclasses, and a bad command line as one line: the machinery every
command of the project shares (the papers' mains through `common.experiments.cli`, the ablation
runner, the comparison and the benchmarks).

`define_dataclass_flags` makes one absl flag per field (fields made with
`common.settings.config.field`): bool, int, float and str, and tuples of them written as comma
lists (`--bandit_widths=1,2,3`), default None so that a flag given is told apart from the default,
with the field's help and default. `parse_flags` reports an unknown flag or a bad value as a
`FlagError` whose text is one line naming the flag; `fail` prints it and exits with status 2.
Importing this module imports absl's flags and nothing heavier.
"""

import dataclasses
import difflib
import sys
import types
import typing
from typing import Any, Mapping, Sequence

from absl import flags

EXIT_USAGE = 2  # status of a bad command line
EXIT_FAILURE = 1  # status of a run that failed (unreachable replay, a failed ablation run)

# How --help names a family key's defaults.
_FAMILY_LABELS = {"MinAtar": "MinAtar games", "Atari": "Atari games"}


class FlagError(ValueError):
    """A bad command line; its text is the one line printed after `error: `."""


_SCALARS = (bool, int, float, str)
_ONE = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_MANY = {bool: "true/false values", int: "integers", float: "numbers", str: "names"}


@dataclasses.dataclass(frozen=True)
class _Kind:
    """How a field is written on the command line."""

    element: type  # bool, int, float or str
    is_tuple: bool = False
    length: int | None = None  # of a fixed-length tuple, e.g. tuple[float, float]

    def describe(self) -> str:
        if not self.is_tuple:
            return _ONE[self.element]
        if self.length is not None:
            return f"{self.length} {_MANY[self.element]} separated by commas"
        return f"a comma list of {_MANY[self.element]}"


def kind_of(hint: Any) -> _Kind:
    """The `_Kind` of a type hint: a scalar, `X | None`, `tuple[X, ...]` or `tuple[X, X]`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _SCALARS:
        return _Kind(hint)
    if origin in (typing.Union, types.UnionType):
        rest = [arg for arg in args if arg is not type(None)]
        if len(rest) == 1 and rest[0] in _SCALARS:
            return _Kind(rest[0])
    if origin is tuple and args and args[0] in _SCALARS:
        if len(args) == 2 and args[1] is Ellipsis:
            return _Kind(args[0], is_tuple=True)
        if all(arg is args[0] for arg in args):
            return _Kind(args[0], is_tuple=True, length=len(args))
    raise TypeError(f"no command-line syntax for a field of type {hint!r}")


def parse_scalar(element: type, text: str) -> bool | int | float | str:
    """One value as written on the command line; ValueError if it is not one."""
    if element is bool:
        lowered = text.lower()
        if lowered in ("true", "t", "yes", "1"):
            return True
        if lowered in ("false", "f", "no", "0"):
            return False
        raise ValueError(text)
    if element is int:
        try:
            return int(text)
        except ValueError:
            number = float(text)  # 2e8 is an integer too
            if not number.is_integer():
                raise
            return int(number)
    if element is float:
        return float(text)
    return text


def flag_text(value: object) -> str:
    """A value as written on the command line (`parse_scalar` reads it back)."""
    if isinstance(value, tuple):
        return ",".join(flag_text(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)


class _FieldParser(flags.ArgumentParser):
    """Parses a field's value; its ValueError says what the flag must be, for `_one_line`."""

    def __init__(self, kind: _Kind, example: str):
        self.kind = kind
        self.example = example
        # absl's help shows it after the default; a string or --[no]flag needs no note.
        plain = not kind.is_tuple and kind.element in (bool, str)
        self.syntactic_help = "" if plain else kind.describe()

    def parse(self, argument):
        if not isinstance(argument, str):  # already a value
            return argument
        kind = self.kind
        try:
            if not kind.is_tuple:
                return parse_scalar(kind.element, argument)
            parts = argument.split(",") if argument.strip() else []
            values = tuple(parse_scalar(kind.element, part.strip()) for part in parts)
        except ValueError:
            values = None
        if values is None or (kind.length is not None and len(values) != kind.length):
            example = f" (e.g. {self.example})" if self.example else ""
            raise ValueError(f"must be {kind.describe()}{example}")
        return values

    def flag_type(self) -> str:
        return self.kind.describe()


class _FieldSerializer(flags.ArgumentSerializer):
    def serialize(self, value) -> str:
        return flag_text(value)


def calling_module_name(depth: int) -> str:
    """The module `depth` frames up, named as absl names modules in --help."""
    name = sys._getframe(depth + 1).f_globals.get("__name__", "")
    return sys.argv[0] if name == "__main__" else name


def define_dataclass_flags(
    data_class: type,
    flag_values: flags.FlagValues = flags.FLAGS,
    module_name: str | None = None,
    env_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    extra_help: Mapping[str, str] | None = None,
) -> None:
    """One flag per field of `data_class`, default None (so a flag given on the command line is
    told apart from the default); the help text is the field's, with its default (and the
    defaults of `env_defaults`) and `extra_help[name]` appended."""
    module_name = module_name or calling_module_name(1)
    hints = typing.get_type_hints(data_class)
    for f in dataclasses.fields(data_class):
        kind = kind_of(hints[f.name])
        notes = []
        if f.default is not None and f.default != ():
            notes.append(
                f"default {f.default!r}"
                if kind.element is str and not kind.is_tuple
                else f"default {flag_text(f.default)}"
            )
        for env, overrides in (env_defaults or {}).items():  # env names and family keys
            if f.name in overrides:
                notes.append(f"{_FAMILY_LABELS.get(env, env)}: {flag_text(overrides[f.name])}")
        text = f.metadata.get("help", "")
        if extra_help and f.name in extra_help:
            text = f"{text} {extra_help[f.name]}"
        if notes:
            text = f"{text} ({'; '.join(notes)})"
        example = flag_text(f.default) if kind.is_tuple and f.default else ""
        flag = flags.Flag(
            _FieldParser(kind, example),
            _FieldSerializer(),
            f.name,
            None,
            text,
            boolean=not kind.is_tuple and kind.element is bool,
        )
        flags.DEFINE_flag(flag, flag_values, module_name=module_name)


def _one_line(error: flags.Error, flag_values: flags.FlagValues) -> str:
    """absl's parse error as one line naming the flag."""
    if isinstance(error, flags.UnrecognizedFlagError):
        close = difflib.get_close_matches(error.flagname, list(flag_values), n=3)
        hint = f" (did you mean {', '.join('--' + name for name in close)}?)" if close else ""
        return f"unknown flag --{error.flagname}{hint}"
    text = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
    text = text.removeprefix("flag ")
    head, separator, tail = text.rpartition(": must ")  # a _FieldParser message
    return f"{head} must {tail}" if separator else text


def parse_flags(argv: Sequence[str], flag_values: flags.FlagValues = flags.FLAGS) -> list[str]:
    """Parses `argv` (program name first) into `flag_values`; returns the arguments that are not
    flags, program name first. FlagError with one line on an unknown flag or a bad value."""
    try:
        return flag_values(list(argv))
    except flags.Error as error:
        raise FlagError(_one_line(error, flag_values)) from None


def given_values(data_class: type, flag_values: flags.FlagValues = flags.FLAGS) -> dict[str, Any]:
    """{field: value} of the fields of `data_class` given on the command line."""
    return {
        f.name: flag_values[f.name].value
        for f in dataclasses.fields(data_class)
        if flag_values[f.name].present
    }


def fail(message: str, status: int = EXIT_USAGE) -> typing.NoReturn:
    """Prints `error: <message>` to stderr and exits with `status`."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)
