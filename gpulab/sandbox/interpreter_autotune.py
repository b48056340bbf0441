"""@triton.autotune with several configs, in the Triton interpreter (the CPU path).

On a GPU the autotuner times every config and keeps the fastest. The
interpreter has no GPU to time on: Triton 3.6-3.9's autotuner asks the
active driver for its benchmarker and fails ("0 active drivers"), so an
honest autotuned kernel failed every CPU check, and the learner was told to
write a second decorator for the CPU. Here, in the interpreter, unless the
kernel's author gave a `do_bench` of their own (a CPU clock: theirs, and
it still times), the autotuner ranks the configs in their order instead of
timing them:
the first config that `prune_configs_by` keeps is used, with no timing
launch at all (a timing run in the interpreter would cost a whole run of
the kernel per config). Everything else is the autotuner's own code, run
as on a GPU: `key` (a new key chooses again), `prune_configs_by`
(early_config_prune and perf_model's top_k), `reset_to_zero` (zeroed
before the chosen config's first run, as after timing) and `restore_value`.

A config that cannot run (a `tl.static_assert` it fails: a GPU's autotuner
skips one that fails to compile) is skipped the same way: the next config
in order is tried, once per key. The interpreter's result does not depend
on the config (num_warps and num_stages mean nothing there, block sizes
change only the order of an fp32 sum), so which one runs is not graded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpulab.wire.protocol import Kwargs

STATE: dict[str, str] = {}

# Errors a GPU's autotuner treats as "this config does not fit", by name
# (their modules moved between Triton releases).
UNFIT = ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")


def apply() -> str:
    """ "fixed" (the autotuner ranks in the interpreter from now on) or
    "failed: why"; once a process. Applied whether or not this machine has
    a GPU driver: where it has one, the interpreter's autotuner times each
    config's whole interpreted run on the CPU, seconds a config, and a CPU
    check's result must not depend on which configs the box happened to time
    fastest. Outside the interpreter (a GPU check, --explain's compile) the
    autotuner is Triton's own."""
    if "state" in STATE:
        return STATE["state"]
    try:
        from triton.runtime import autotuner

        _patch(autotuner.Autotuner)
        STATE["state"] = "fixed"
    except Exception as exc:  # noqa: BLE001 - an autotuner built otherwise
        STATE["state"] = f"failed: {type(exc).__name__}: {exc}"
    return STATE["state"]


def _patch(cls: Any) -> None:
    bench, run = cls._bench, cls.run

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        if not _ranks(self):
            return bench(self, *args, config=config, **meta)
        # The rank of `config` in the autotuner's list, as its "time": the
        # first wins. A config that failed to run for this key comes last.
        if (getattr(self, "_gpulab_key", None), config) in self.__dict__.get("_gpulab_unfit", ()):
            return [float("inf")] * 3
        rank = float(self.configs.index(config)) if config in self.configs else 0.0
        return [rank] * 3

    def run_ranked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _ranks(self):
            return run(self, *args, **kwargs)
        failed: set[Any] = self.__dict__.setdefault("_gpulab_unfit", set())
        while True:
            self._gpulab_key = _key(self, args, kwargs)
            try:
                return run(self, *args, **kwargs)
            except Exception as exc:
                config = self.cache.get(self._gpulab_key)
                if config is None or not _unfit(exc) or len(self.configs) < 2:
                    raise
                failed.add((self._gpulab_key, config))
                if all((self._gpulab_key, c) in failed for c in self.configs):
                    raise
                del self.cache[self._gpulab_key]

    cls._bench = _bench
    cls.run = run_ranked


def _ranks(tuner: Any) -> bool:
    """Whether this autotuner ranks instead of timing: in the interpreter,
    and only where it would ask the missing driver (a `do_bench` the kernel's
    author gave, a CPU clock say, is theirs and still times)."""
    return tuner.__dict__.get("_do_bench") is None and _interpreting()


def _interpreting() -> bool:
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):
        import os

        return os.environ.get("TRITON_INTERPRET") == "1"


def _key(self: Any, args: tuple[Any, ...], kwargs: Kwargs) -> tuple[Any, ...]:
    """The autotuner's cache key for this call, made as its run() makes it."""
    nargs = dict(zip(self.arg_names, args, strict=False))
    named = {k: v for k, v in {**nargs, **kwargs}.items() if k in self.arg_names}
    key = [named[k] for k in self.keys if k in named]
    key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    return tuple(key)


def _unfit(exc: BaseException) -> bool:
    """Whether `exc` says the config cannot run at all: one of UNFIT, or a
    `tl.static_assert` that failed in the interpreter (an AssertionError
    raised by the interpreter's static_assert)."""
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if type(err).__name__ in UNFIT:
            return True
        if isinstance(err, AssertionError) and _from_static_assert(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def _from_static_assert(err: BaseException) -> bool:
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_new_static_assert":
            return True
        tb = tb.tb_next
    return False


__all__ = ["STATE", "apply"]
