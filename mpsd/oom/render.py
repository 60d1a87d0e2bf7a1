"""The human explanation of findings: the numbers, the arithmetic, the ratio in force, the fix.

Pure: findings (and limits.toml's record, when there is one) in, text out. Every size is
printed in powers of 1024 spelt GiB/MiB/KiB, whatever the message spelt (PyTorch 2.0 to 2.7
print them "GB"/"MB"/"KB"); the first table that needs it says so, once.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING

from mpsd import term
from mpsd.oom import finding as fk
from mpsd.oom import kills, macs
from mpsd.oom.finding import Finding
from mpsd.oom.normalize import compiled
from mpsd.ratio import HIGH_VAR as HIGH
from mpsd.ratio import LOW_VAR as LOW
from mpsd.ratio import ratio_text
from mpsd.term import Style

if TYPE_CHECKING:
    from mpsd.limits import Limits


def size(n: float) -> str:
    """Bytes the way PyTorch prints them, spelt GiB/MiB/KiB (two decimals, powers of 1024)."""
    for power, prefix in ((4, "T"), (3, "G"), (2, "M"), (1, "K")):
        if n > 1024 and n >= 1024**power:
            return f"{n / 1024**power:.2f} {prefix}iB"
    return f"{round(n)} bytes"


def mac_name(ram_gb: int) -> str:
    """ "a 16 GB Mac", "an 8 GB Mac"."""
    return f"{'an' if ram_gb in (8, 18) else 'a'} {ram_gb} GB Mac"


SWAPS = (
    "Under PyTorch's default 1.7 cap a trial that swaps counts as a success, so the finder "
    f"picks a batch that swaps: set a ratio first ({HIGH}, or `mpsd enable`)."
)
TRACEBACK = {  # what the traceback around an MPS error tells (Finding.context)
    "dataloader": "The traceback shows a DataLoader: with pin_memory=True its pinned buffers come "
    "out of the MPS allocator, against this cap (pinning buys little on unified memory): set "
    "pin_memory=False.",
    "accelerate_finder": "The traceback shows accelerate's find_executable_batch_size (the HF "
    "Trainer's auto_find_batch_size): since PR 4227 (September 2026) accelerate retries this MPS "
    f"error with half the batch; an older one does not: upgrade accelerate. {SWAPS}",
    "lightning_finder": "The traceback shows Lightning's BatchSizeFinder: its is_oom_error misses "
    "this MPS error, so the search stopped: set the batch size by hand (the last one that ran). "
    f"{SWAPS}",
}
ARTICLE = '"MPS backend out of memory on a Mac: what the numbers mean and how to set the watermark"'
SPLIT = "a smaller batch or resolution, tiled VAE decoding, chunked attention"
BUFFER = (
    "larger than the largest buffer Metal allows on this Mac (its maxBufferLength). No memory "
    f"setting changes this: split the work ({SPLIT})."
)
UNITS = '  (The message\'s "GB" and "MB" are GiB and MiB, powers of 1024: the units used here.)'
LESS = "smaller batch or resolution, float16, one model at a time, tiling"

# Every sentence of more than a few words, by name; ``say`` fills in the numbers.
SAY = {
    # --- MPS out of memory: why it failed
    "too_big": "The request alone, {request}, is more than the whole {cap} cap: a tensor's shape "
    "or the batch is the problem first.",
    "over": "{terms}, over the {cap} cap by {over}.",
    "at_cap": "{terms}: at the {cap} cap (each number is rounded to 2 decimals{rounds}, so the "
    "last allocation tipped it).",
    "with_cap": "{terms}, with the {cap} cap.",
    "under_cap": "{terms}, under the {cap} cap: the numbers do not add up (see the note below).",
    "cap_unknown": 'The paste {cut} "max allowed": the cap in force is unknown.',
    "cap_off": 'No "max allowed" in the message: the cap was off ({HIGH}=0.0), so PyTorch '
    "allocated until Metal itself ran out. That is what lets a job push the Mac into swap: "
    "macOS swaps long before Metal refuses.",
    "needed_more": "PyTorch needed more than the {cap} cap allows.",
    "smaller_first": "First make the step smaller: one allocation of {request} needs a smaller "
    "batch, resolution or tile, or float16; a ratio alone will not make room for it.",
    "bogus_other": '"other allocations" of {other} is more memory than any Mac has: a bogus number '
    "(an accounting bug of that PyTorch/macOS version), not memory really in use.",
    # --- the ratio in force
    "far_below": "{cap} is far below any Mac's recommended maximum: a small ratio or memory "
    "fraction was set for this job (by you, or by the app).",
    "no_mac": "{cap} matches no common Mac with a round ratio. If PyTorch's default {default} "
    "was in force, this Mac's recommended maximum is {max}.",
    "all_memory": "A cap of {cap} on {mac} is {much} its memory: macOS swaps long before "
    "PyTorch stops the job.",
    "about": "The estimate errs high, so the ratio in force was about {about} or more.",
    "higher_ratio": "mpsd's value now is {mpsd}, a cap of at most {mpsd_cap} (the estimate errs "
    "high): this job ran with a higher ratio (set by hand, or before mpsd's last update).",
    "maybe_mpsd": "mpsd's value now is {mpsd}. With an estimated maximum, mpsd cannot tell "
    "whether this job ran with it: it did if this Mac's real maximum is about {max}.",
    "another": "mpsd's value now is {mpsd}: this job ran with another (set by hand, or before "
    "mpsd's last update).",
    "no_ratio": "No ratio of two decimals gives this cap on this Mac, so it is not mpsd's value "
    "({mpsd}): a memory fraction may have been set (torch.mps.set_per_process_memory_fraction, "
    "by the program or a library), or the job ran with another Mac's or macOS's recommended max.",
    "above_free": "The cap is above the {free} usually free on this Mac: macOS swaps before "
    "PyTorch stops the job.",
    "install": "(`mpsd install` reads this Mac's recommended maximum, so `mpsd explain` can say "
    "for sure.)",
    "estimate_whose": "mpsd's estimate of this Mac's recommended maximum, from its RAM: Metal's "
    "own figure could not be read",
    # --- whether the fix makes room
    "failed_at": "That is the cap this job failed at: make the job use less memory ({LESS}).",
    "less_than": "{lead} less than the {floor} this job needed: make it use less memory too "
    "({LESS}).",
    "no_cap": "{lead} above the {need} the message shows, but with no cap the job ran until "
    "Metal ran out: it may need more than that.",
    "fits_if": "{lead} above the {cap} cap this job failed at: it fits if it needed less than "
    "{room} more than that (the message does not say).",
    # --- CUDA
    "whole_gpu": "One allocation of {request} is more than the whole GPU ({total}): a tensor's "
    "shape or the batch is the problem first.",
    "fraction": "{held} held by PyTorch + the {request} request = {sum}, over the {allowed} this "
    "process is allowed{room}: torch.cuda.set_per_process_memory_fraction stopped it, not the GPU.",
    "free_unknown": "PyTorch asked for {request}; the message does not say what was free.",
    "in_pieces": "PyTorch asked for {request} while {free} was free: the free memory was in "
    "pieces, or taken by the time PyTorch asked (another process).",
    "short": "PyTorch asked for {request}; only {free} was free on the GPU, {short} short.",
    "fragmented": "PyTorch also held {unused} reserved but unallocated (its cache): with the free "
    "memory, {both}, enough for the request, but not in one piece. That is fragmentation.",
    "too_little": "PyTorch also held {unused} reserved but unallocated (its cache): free and "
    "cached together, {both}, are less than the request: use less memory, or free the GPU.",
    "cached": "PyTorch held {unused} reserved but unallocated (its cache).",
    "others": "Other processes held {held} of the GPU ({listed}).",
    "container": "The message lists {listed}, and names none as this process (in a container "
    "PyTorch cannot tell): the one holding at least PyTorch's reserved memory is likely this one.",
    "outside": "PyTorch holds little of the GPU, but this process has {in_use} in use: memory "
    "outside PyTorch's allocator (other libraries, CUDA contexts).",
    "private_pools": "{pools} of PyTorch's memory is in private pools (CUDA Graphs, as "
    "torch.compile's reduce-overhead mode makes), which no other tensor can reuse. Fewer "
    "captured graphs (or shapes) free it.",
    # --- the fix
    "mpsd_value": "mpsd's current value for this Mac: a cap of {cap} ({high} x {max}{of}).",
    "safe_start": "{high} is a safe start: in the article {ARTICLE}, 0.8 gave a clean error and "
    "no swap on a 48 GB Mac where 1.0 still swapped; `mpsd install` measures this Mac's value.",
    "set_both": "Set both, together, before python starts: LOW must not exceed HIGH, and PyTorch\n"
    "reads them once, when MPS starts. Never 0.0: that removes the cap and invites swap.",
    "let_mpsd": "Or let mpsd set them for every python run in the project: {enable} (in the "
    "project's directory).",
    "high_refused": "PyTorch refused the high watermark ratio {ratio}: HIGH must be between 0 "
    "and 2.",
    "low_refused": "PyTorch refused the low watermark ratio {ratio}: LOW must be between 0 and "
    "HIGH.",
    "low_default": "{ratio} is LOW's default: {HIGH} was set below 1.4 and {LOW} was left unset.",
    "keep_high": "To keep the HIGH you chose, set LOW to the same value: {HIGH}=X {LOW}=X.",
    "a_setting": "It is a setting, not a lack of memory.",
    "first_use": "It is a setting, not a lack of memory: it fails at the first MPS use, whatever "
    "is free.",
    "restart": "Then restart the Python process (the notebook's kernel too): PyTorch keeps the "
    "values it read, so changing os.environ in the process that failed does nothing.",
    "raise_fraction": "Raise the fraction given to torch.cuda.set_per_process_memory_fraction (or "
    "drop the call) if the GPU is this job's; else make the job use less memory.",
    "expandable": "{lead} {cmd} (before {runtime}): the allocator then grows its segments "
    "instead of leaving cached pieces too small to reuse.{here}",
    "max_split": "The message suggests max_split_size_mb: {cmd} (before {runtime}; 128 is "
    "an example) keeps large cached blocks whole for large requests. On PyTorch 2.1 and later "
    "expandable_segments:True usually does better.{here}",
    "here_whole": " Here it may be the whole fix: the free and the cached memory together would "
    "hold the request.",
    "here_short": " Here it cannot make room enough: the free and the cached memory together are "
    "less than the request.",
    "usual": "Usual fixes: a smaller batch or resolution, float16/bfloat16, gradient "
    "checkpointing, offloading (lowvram modes), freeing other GPU users.",
    # --- the operating system's kills
    "oom_killer": "The machine ran out of RAM (and swap): the kernel killed the process it "
    "scored worst, with SIGKILL, so the program printed no error of its own.",
    "cgroup": "A memory cgroup's limit was reached (a container's, a pod's limits.memory, "
    "Slurm's --mem), not the machine's RAM: raise that limit, or use less ({LESS}).",
    "swap_out": "macOS ran out of swap space (no paging space: the disk was nearly full, or "
    "swap hit its limit) and killed the process holding the most compressed memory.",
    "jetsam": "macOS's memory-pressure handler (jetsam) killed it ({reason}).",
    "jetsam_cut": "The report was cut before its list of processes: the killed one is the one "
    'with a "reason"; "largestProcess" ({largest}) is only the largest.',
    "kill_fix": "Use less memory ({LESS}), fewer DataLoader workers, close other programs; a "
    "SIGKILL leaves no traceback, so the log ends where the job was.",
    "killed": "The job got SIGKILL (signal 9; exit code 137, or -9): most often the system "
    "killing it for memory, but also a kill -9, a scheduler's limit or a watchdog. The system's "
    "log says which: paste its kill line (Linux: dmesg; macOS: log show --last 1h --predicate "
    "'eventMessage CONTAINS \"memorystatus\"'). `mpsd jobs` records such kills where its "
    "daemon ran and could read the log.",
    "more_than_free": "This job needed at least {floor}, more than the {free} usually free on "
    "this Mac: a higher cap only trades the error for swap. Make it use less memory ({LESS}).",
    "xpu_first": "The request, {request}, is over the 4 GiB that Intel's GPUs allow in one "
    "allocation: that is why it failed first, whatever is free. Split the work (" + SPLIT + ").",
    "init": "CUDA ran out of memory while starting, before any tensor: under WSL2 the "
    "memory WSL may use (.wslconfig's memory=), else the driver; `wsl --shutdown`, then retry.",
    "vllm": "vLLM takes --gpu-memory-utilization (0.9 by default) of the GPU for the weights and "
    "its KV cache: lower it when something else uses the GPU, raise it when the cache has no "
    "room; --max-model-len and --max-num-seqs shrink the cache it needs.",
    "vllm_cache": "vLLM found no memory left for its KV cache after loading the model.",
    "dataloader": "The traceback shows a DataLoader: each worker (num_workers) holds its own "
    "copy of what the dataset keeps in memory, and pin_memory=True pins host memory too: "
    "fewer workers, or pin_memory=False.",
    "xla_asked": "{who} asked for {request}{free}.",
    "cuda_reported": ", while CUDA reported {free} free of {total}",
    "xla_in_use": "The allocator held {in_use} of its {limit} limit.",
    "bfc_warning": "TensorFlow's allocator says this is not a failure: it retries, and the job "
    "goes on unless an error follows.",
    "tpu_hbm": "The program needs {in_use} of TPU memory (HBM); the TPU has {total}: XLA "
    "refused it when compiling.",
    "arguments": "The program's inputs and outputs alone take {request}, over the {limit} XLA "
    "allows on this GPU: XLA cannot schedule it.",
    "ggml_asked": "llama.cpp asked the {backend} device for {request} (model weights, KV cache "
    "or compute buffers) and the driver refused: not enough free memory on the GPU.",
    "out_of_ram": "The process ran out of main memory (RAM and swap, or the Windows page file). "
    "Use less ({LESS}), close other apps, or give the system more swap.",
    # --- notes without numbers
    "not_add_up": "PyTorch does not check the printed numbers against the cap: it adds the "
    "request's aligned size (rounded up to a block) to the driver's whole allocation for the "
    "process; both can exceed what is printed, so the printed numbers can fall short of the cap.",
    "above_cap": '"MPS allocated" is above the cap, as when the cap is lowered after the memory '
    "was allocated (torch.mps.set_per_process_memory_fraction, by the program or a library): the "
    "next allocation fails at once.",
    "outside_fills": 'PyTorch\'s allocator holds almost nothing: "other allocations" fill the cap, '
    "memory outside it (other libraries' Metal buffers, MPSGraph caches, memory freed but not "
    "yet returned); with many workers in one process their shares add up.",
    "outside_exceeds": '"other allocations" exceed what PyTorch\'s allocator holds: much of the '
    "memory is outside it (other libraries' Metal buffers, MPSGraph caches).",
    "cuda_runtime": "The CUDA driver (or a CUDA library) could not allocate: the GPU was full, "
    "maybe by another process. Errors are reported late: CUDA_LAUNCH_BLOCKING=1 finds the line.",
    "sysmem": "PyTorch holds more than the GPU has: on Windows the driver spills into system RAM "
    '("CUDA sysmem fallback"), which is slow.',
    "gpu_full": "PyTorch holds little of the GPU, yet it is full: other processes (or the "
    "desktop) use it; check nvidia-smi.",
}


def say(name: str, **values: float | str) -> str:
    """Sentence ``name`` of SAY with its numbers: an int printed as a size, a float as a ratio."""
    shown = {
        key: size(v) if isinstance(v, int) else ratio_text(v) if isinstance(v, float) else v
        for key, v in values.items()
    }
    return SAY[name].format(HIGH=HIGH, LOW=LOW, LESS=LESS, ARTICLE=ARTICLE, **shown)


OTHER = {  # the MPS and Metal errors that are no lack of PyTorch's memory, by detail
    "invalid_buffer_size": f"One tensor is {BUFFER}",
    "ndarray_too_large": "An MPS kernel got a tensor of more than 4 GiB (2**32 bytes), more than "
    "MPSNDArray takes on this macOS. Not a lack of memory: no ratio changes it. Split the work "
    "(smaller batch or tiles), update macOS and PyTorch, or run that step on the CPU.",
    "dimension_too_large": "A tensor dimension (or the product of dimensions) is above 2**31, "
    "beyond what Metal's kernels index. Not a lack of memory: split the tensor into chunks, or "
    "run that step on the CPU.",
    "command_buffer_oom": "Metal itself ran out of memory while running a GPU command: the "
    "system had no memory left for it (other apps, or a program allowed more than is really "
    "free).",
    "buffer_size": f"MLX asked Metal for one buffer {BUFFER}",
    "resource_limit": "MLX reached Metal's limit on buffers alive at once ({f.resource_limit} of "
    "them): many small arrays, or a graph evaluated too late. Evaluate more often (mx.eval "
    "inside the loop) and keep fewer arrays alive; it is not a lack of memory.",
    "size_limit": "Intel's extension for PyTorch refuses any single allocation over 4 GiB on "
    "this GPU: a limit of the platform, not a lack of memory (what is free does not matter). "
    f"Split the work so no tensor needs more than 4 GiB: {SPLIT}.",
    "status_5": "Metal reported command buffer status 5, an error, without its reason: most "
    'often out of memory (newer builds print "Insufficient Memory").',
    "malloc_or_wait": "MLX's allocator (before [metal::malloc]) could not get that buffer from "
    "Metal: the Mac's memory was used up.",
    "internal_assert": "PyTorch's MPS allocator failed an internal check of its watermarks: the "
    "ratio variables are inconsistent. Set both, to the same plain decimal.",
}
# The fix for the Metal program that raised the error: never PyTorch's variables to another.
WIRED = (
    "`sudo sysctl iogpu.wired_limit_mb=N` lets the GPU wire more, but too much starves macOS "
    "(it has frozen and panicked Macs): leave macOS several GB (reset at reboot)."
)
FIXES: dict[str | None, list[str]] = {
    "mlx": [
        "MLX reads no environment variable for its limits: set them in the program, before the "
        "work: mx.set_memory_limit(bytes) (its default, up to 1.5 x Metal's recommended maximum "
        "and 0.95 x RAM, is soft and lets the Mac swap) and mx.set_cache_limit(bytes).",
        "In a project opted in with `mpsd enable`, mpsd's start-up hook sets both for you right "
        "after `import mlx.core`, to the limit `mpsd status` shows (not in apps that bundle "
        "their own Python, such as LM Studio).",
        "Or a smaller or quantised model (4-bit), a shorter context, a smaller batch.",
        WIRED,
    ],
    "ggml": [
        "llama.cpp (ggml) has its own options: a smaller context (-c / --ctx-size), fewer layers "
        "on the GPU (-ngl / --n-gpu-layers), a smaller batch (-b / -ub), a smaller quantisation "
        "(Q4_K_M rather than Q8_0); in Ollama, num_ctx and num_gpu.",
        WIRED,
    ],
    "jax": [
        "JAX takes 75% of the GPU when it starts: {mem_fraction} (before python starts) lets it "
        "take more; {preallocate} makes it allocate as needed (two processes on one GPU).",
        "Usual fixes: a smaller batch, jax.checkpoint (rematerialisation), sharding over devices.",
    ],
    "xla": [
        "The paste does not say which program drove XLA. In JAX: {mem_fraction} or "
        "{preallocate}; in any: a smaller batch or model, or sharding over more devices.",
    ],
    "tensorflow": [
        "tf.config.experimental.set_memory_growth(gpu, True) for each GPU, before any op runs: "
        "TensorFlow then takes memory as it needs it, not nearly all at start (needed when "
        "another process shares the GPU). For fragmentation: {tf_allocator}.",
        "Usual fixes: a smaller batch or input, mixed precision (float16), a smaller model.",
    ],
    None: [
        "The paste does not say which program raised it. Close other apps, use a smaller model "
        "or batch; then, for PyTorch, `mpsd enable`; for MLX, mx.set_memory_limit; for "
        "llama.cpp, a smaller --ctx-size or fewer --n-gpu-layers.",
    ],
}


def indent(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines]


class Renderer:
    """What the explanation knows (limits.toml's record, None without one), its style, and
    whether the units were said. The methods give their lines unindented."""

    def __init__(self, limits: Limits | None, style: Style) -> None:
        self.limits = limits
        self.estimated = limits is not None and limits.recommended_max_source == "estimate"
        self.style = style
        self.units_said = False
        self.context: frozenset[str] = frozenset()

    def setenv(self, pairs: str) -> str:
        """``"A=1 B=2"`` set in the user's shell: export, cmd's set and PowerShell, R."""
        items = [pair.split("=", 1) for pair in pairs.split()]
        if "r" in self.context:
            return self.style.cmd("Sys.setenv(" + ", ".join(f'{k} = "{v}"' for k, v in items) + ")")
        if "windows" in self.context:
            cmd = " & ".join(f"set {k}={v}" for k, v in items)
            ps = "; ".join(f'$env:{k}="{v}"' for k, v in items)
            return f"{self.style.cmd(cmd)} (cmd), {self.style.cmd(ps)} (PowerShell)"
        return self.style.cmd(f"export {pairs}")

    def fixes(self, framework: str | None) -> list[str]:
        cmds = {"mem_fraction": "XLA_PYTHON_CLIENT_MEM_FRACTION=.90"}
        cmds |= {"preallocate": "XLA_PYTHON_CLIENT_PREALLOCATE=false"}
        cmds |= {"tf_allocator": "TF_GPU_ALLOCATOR=cuda_malloc_async"}
        return [s.format(**{k: self.setenv(v) for k, v in cmds.items()}) for s in FIXES[framework]]

    def finding(self, f: Finding) -> list[str]:
        title, body = KINDS[f.kind]
        self.context = f.context
        backend = BACKENDS.get(f.backend or "", "GPU")
        title = title.format(backend=backend, framework=NAMES[f.framework])
        if f.kind == fk.CUDA_OOM and f.backend and f.backend != "cuda":
            title = f"{f.backend.upper()} out of memory"
        if f.detail in ("command_buffer_oom", "status_5") and f.framework != "torch":
            names = {"mlx": " (MLX)", "ggml": " (llama.cpp, ggml)"}
            title = "Metal out of memory" if f.detail[0] == "c" else "Metal error"
            title += names.get(f.framework or "", "")
        if f.kill is not None:
            by = "" if "Linux" in f.kill.reason else f" by {OS_NAMES[f.kill.os]}"
            title += f"{by} ({f.kill.reason})"
        if f.count > 1:
            title += f" (seen {f.count} times)"
        lines = body(self, f)
        if "dataloader" in f.context and f.kind != fk.MPS_OOM:
            lines += ["", *self.notes([SAY["dataloader"]])]
        return [self.style.title(title), *self.table(ROWS.get(f.kind, ()), f), *lines]

    def table(self, rows: tuple[str, ...], f: Finding) -> list[str]:
        """The rows with a number, aligned; under the first table that spelt "GB", UNITS."""
        pool = f" ({f.pool} pool)" if f.pool else ""
        cells = [row.split("|") for row in rows]
        shown = [
            (label, size(getattr(f, f"{key}_bytes")), meaning.format(pool=pool))
            for label, key, meaning in cells
            if getattr(f, f"{key}_bytes") is not None
        ]
        out = self.aligned(shown)
        if out and not f.binary_units and not self.units_said:
            self.units_said = True
            out.append(self.style.dim(UNITS))
        return out

    def aligned(self, rows: list[tuple[str, str, str]]) -> list[str]:
        """Rows of (label, number, meaning) in aligned columns."""
        wl, wv = (max((len(row[i]) for row in rows), default=0) for i in (0, 1))
        return [f"  {a:<{wl}}  {b:>{wv}}  {self.style.dim(c)}".rstrip() for a, b, c in rows]

    def section(self, head: str, lines: list[str]) -> list[str]:
        return ["", self.style.head(head), *indent(lines)]

    def notes(self, notes: list[str]) -> list[str]:
        return [f"{self.style.warn('Note:')} {n}" for n in notes]

    def fix_lines(self, ratio_hint: str = "", first: str = "") -> list[str]:
        """The fix: both variables, mpsd's value (then ``ratio_hint``), opting the project in;
        ``first`` comes before everything (what matters more)."""
        if self.limits is not None:
            high, low = self.limits.high_watermark_ratio, self.limits.low_watermark_ratio
            rm = self.limits.recommended_max_bytes
            # The real cap is high x the real maximum, which an estimate only approaches.
            cap = ("about " if self.estimated else "") + size(macs.cap_of(high, rm))
            of = ", an estimated maximum" if self.estimated else ""
            why = say("mpsd_value", cap=cap, high=high, max=rm, of=of)
        else:
            high = low = macs.FALLBACK_RATIO
            why = say("safe_start", high=high)
        return [
            *([first] if first else []),
            self.setenv(f"{HIGH}={ratio_text(high)} {LOW}={ratio_text(low)}"),
            why,
            *([ratio_hint] if ratio_hint else []),
            *SAY["set_both"].split("\n"),
            say("let_mpsd", enable=self.style.cmd("mpsd enable")),
        ]

    def mps_oom(self, f: Finding) -> list[str]:
        known = [n for n in (f.allocated_bytes, f.other_bytes, f.requested_bytes) if n is not None]
        need, cap, request = sum(known), f.max_allowed_bytes, f.requested_bytes
        lost = [] if known or cap is not None else ["  (the paste lost the numbers)"]
        why: list[str] = []
        too_big = cap is not None and request is not None and request > cap
        if too_big:
            why.append(say("too_big", request=request or 0, cap=cap or 0))
        short = False
        if known and cap is not None:
            terms = f"{' + '.join(map(size, known))} = {size(need)}"
            over, slack = need - cap, sum(f.rounding.values())
            if over > slack:
                why.append(say("over", terms=terms, cap=cap, over=over))
            elif over >= -slack - (request or 0) // 32:  # PyTorch rounds a large request up ~3%
                rounds = "" if over >= -slack else " and PyTorch rounds a large request up ~3%"
                why.append(say("at_cap", terms=terms, cap=cap, rounds=rounds))
            else:
                short = len(known) == 3
                why.append(say("under_cap" if short else "with_cap", terms=terms, cap=cap))
            if len(known) < 3:
                why.append("(the paste lost some numbers: the sum is only what it kept)")
        elif cap is None and (request is None or f.detail != "oom"):
            cut = "lost the number of" if f.detail != "oom" else "ends before"
            why.append(say("cap_unknown", cut=cut))
        elif cap is None:
            why.append(say("cap_off"))
        else:
            why.append(say("needed_more", cap=cap))
        first = say("smaller_first", request=request or 0) if too_big else ""
        fix = self.fix_lines("" if too_big else self.fit_hint(f, need if known else None), first)
        return [
            *lost,
            *self.section("Why it failed", why + self.mps_notes(f, short)),
            *self.section("The ratio in force", self.ratio_lines(f)),
            *self.section("Fix", fix),
        ]

    def mps_notes(self, f: Finding, short: bool) -> list[str]:
        notes = [SAY["not_add_up"]] if short else []
        cap, alloc, other = f.max_allowed_bytes, f.allocated_bytes, f.other_bytes
        if other is not None and other > macs.LARGEST_MAC:
            notes.append(say("bogus_other", other=other))
        slack = f.rounding.get("max_allowed_bytes", 0)
        if cap is not None and alloc is not None and alloc > cap + slack:
            notes.append(SAY["above_cap"])
        if cap and alloc is not None and other and alloc <= cap * 0.05 and other >= cap * 0.5:
            notes.append(SAY["outside_fills"])
        elif other is not None and alloc is not None and other > alloc and other > (cap or 0) * 0.3:
            notes.append(SAY["outside_exceeds"])
        return self.notes(notes + [TRACEBACK[c] for c in sorted(f.context) if c in TRACEBACK])

    def ratio_lines(self, f: Finding) -> list[str]:
        cap = f.max_allowed_bytes
        if cap is None and f.requested_bytes is not None and f.detail == "oom":
            return ["0.0: no cap (the ratio that removes it)."]
        if cap is None:
            return ['Unknown: the message has no "max allowed".']
        slack = f.rounding.get("max_allowed_bytes", 0)
        if self.limits is not None:
            return self.ratio_against(cap, slack, self.limits)
        guesses = macs.guesses(cap, slack)
        if not guesses and cap < min(ws for _, ws in macs.WORKING_SETS) * 0.75:
            return [say("far_below", cap=cap)]
        if not guesses:
            default = macs.DEFAULT_HIGH
            return [say("no_mac", cap=cap, default=str(default), max=size(cap / default))]
        out = []
        for i, g in enumerate(guesses):
            ratio = "the default ratio" if g.is_default else f"a ratio of {ratio_text(g.ratio)}"
            lead = f"{size(cap)} =" if i == 0 else "   or"
            mac = mac_name(g.ram_gb)
            out.append(f"{lead} {ratio_text(g.ratio)} x {size(g.working_set)}: {ratio} on {mac}")
        best = guesses[0]
        ram = best.ram_gb * macs.GIB
        if best.is_default and cap > ram * 0.9:
            much = "more than" if cap > ram else "about all of"
            out.append(say("all_memory", cap=cap, mac=mac_name(best.ram_gb), much=much))
        out.append(SAY["install"])
        return out

    def ratio_against(self, cap: int, slack: int, lim: Limits) -> list[str]:
        """The ratio in force against this Mac's recommended max: "cap = r x max" only for a
        ratio that gives the cap (``macs.gives``), "mpsd's value" only when mpsd's ratio does;
        against an estimated max (which errs high), only "about"."""
        rm, high = lim.recommended_max_bytes, lim.high_watermark_ratio
        is_default = macs.gives(macs.DEFAULT_HIGH, rm, cap, slack)
        is_mpsd = macs.gives(high, rm, cap, slack)
        found: float | None = None  # the ratio that gives the cap
        if is_default or is_mpsd:
            found = macs.DEFAULT_HIGH if is_default else high
        elif not self.estimated:
            found = macs.ratio_behind(cap, slack, rm)
        whose = "this Mac's recommended maximum, from limits.toml"
        whose = SAY["estimate_whose"] if self.estimated else whose
        if found is not None:
            out = [f"{size(cap)} = {ratio_text(found)} x {size(rm)} ({whose})"]
        else:
            about = f"{cap / rm:.2f}"
            out = [f"{size(cap)} is about {about} x {size(rm)} ({whose})."]
            if self.estimated:
                out.append(say("about", about=about))
        mpsd, mpsd_cap = ratio_text(high), macs.cap_of(high, rm)
        if is_default:
            out.append(f"That is {macs.DEFAULT_NOTE}: {HIGH} was not set for this job.")
        elif is_mpsd:
            out.append("That is mpsd's value: the job ran with mpsd's variables.")
        elif self.estimated and cap > mpsd_cap + slack:
            out.append(say("higher_ratio", mpsd=mpsd, mpsd_cap=mpsd_cap))
        elif self.estimated:
            out.append(say("maybe_mpsd", mpsd=mpsd, max=size(cap / high)))
        elif found is not None and round(found, 2) == found:
            out.append(say("another", mpsd=mpsd))
        else:
            out.append(say("no_ratio", mpsd=mpsd))
        if cap > lim.baseline_free_bytes:
            out.append(say("above_free", free=lim.baseline_free_bytes))
        return out

    def fit_hint(self, f: Finding, need: int | None) -> str:
        """Whether the value in the fix makes room for this job. The job failed at the cap
        in force, so it needed more than that cap, whatever the printed numbers add up to:
        a cap is never said to be "enough", only above or below what the job needed."""
        if need is None:
            return ""
        cap = f.max_allowed_bytes
        slack = f.rounding.get("max_allowed_bytes", 0)
        if self.limits is None:
            guesses = macs.guesses(cap or 0, slack)
            if not guesses:
                return ""
            safe = round(macs.FALLBACK_RATIO * guesses[0].working_set)
            lead = f"At that value the cap is {size(safe)} on {mac_name(guesses[0].ram_gb)},"
        else:
            high, rm = self.limits.high_watermark_ratio, self.limits.recommended_max_bytes
            if cap is not None and macs.gives(high, rm, cap, slack):
                return say("failed_at")
            safe = macs.cap_of(high, rm)  # the fix's line above has given it
            lead = "By mpsd's estimate, that cap is" if self.estimated else "That cap is"
        floor = max(need, cap or 0)  # what the job needed, at least
        if safe <= floor:
            return say("less_than", lead=lead, floor=floor)
        if self.limits is not None and floor > self.limits.baseline_free_bytes:
            return say("more_than_free", floor=floor, free=self.limits.baseline_free_bytes)
        if cap is None:
            return say("no_cap", lead=lead, need=need)
        hint = say("fits_if", lead=lead, cap=cap, room=safe - cap)
        if self.estimated:
            hint += " If the job already ran with mpsd's value, the real cap is the same one."
        return hint

    def watermark(self, f: Finding) -> list[str]:
        shown = ratio_text(f.ratio) if f.ratio is not None else "?"
        if f.kind == fk.MPS_INVALID_HIGH:
            out = [say("high_refused", ratio=shown), SAY["a_setting"]]
        else:
            out = [say("low_refused", ratio=shown)]
            if f.ratio is not None and abs(f.ratio - macs.DEFAULT_LOW) < 1e-9:
                out.append(say("low_default", ratio=shown))
            out += [say("keep_high"), SAY["first_use"]]
        return indent(out) + self.section("Fix", [*self.fix_lines(), SAY["restart"]])

    def mps_other(self, f: Finding) -> list[str]:
        out = [f"  {OTHER.get(f.detail, 'An MPS memory error.').format(f=f)}"]
        if f.detail in ("command_buffer_oom", "status_5") and f.framework != "torch":
            return out + self.section("Fix", self.fixes(f.framework))
        if f.detail == "malloc_or_wait":
            return out + self.section("Fix", self.fixes("mlx"))
        if f.detail in ("command_buffer_oom", "internal_assert"):
            stop = "A lower ratio makes PyTorch stop first." if f.detail[0] == "c" else ""
            out += self.section("Fix", self.fix_lines("", stop))
        return out

    def cuda(self, f: Finding) -> list[str]:
        notes = [SAY["cuda_runtime"]] if f.detail in ("runtime", "library_alloc_failed") else []
        notes += [SAY[f.detail]] if f.detail in ("init", "vllm_cache") else []
        total, alloc, res = f.total_bytes, f.allocated_bytes, f.reserved_bytes
        if total is not None and alloc is not None and alloc > total:
            notes.append(SAY["sysmem"])
        free, in_use, others = f.free_bytes, f.in_use_bytes, f.other_processes or ()
        busy = total is not None and free is not None and free < total * 0.1
        if others:
            listed = ", ".join(f"process {pid}: {size(n)}" for pid, n in others[:4])
            said = "others" if in_use is not None else "container"  # (no process is this one)
            notes.append(say(said, held=sum(n for _, n in others), listed=listed))
        elif busy and total is not None and res is not None and res < total * 0.5:
            if in_use is not None and in_use > total * 0.5:
                notes.append(say("outside", in_use=in_use))
            else:
                notes.append(SAY["gpu_full"])
        if f.private_pool_bytes:
            notes.append(say("private_pools", pools=f.private_pool_bytes))
        why = self.cuda_why(f) + self.notes(notes)
        fix = self.section("Fix", self.cuda_fix(f))
        return (self.section("Why it failed", why) if why else []) + fix

    def cuda_why(self, f: Finding) -> list[str]:
        """The request against the GPU's free memory and PyTorch's cache: which was short."""
        req, free, total = f.requested_bytes, f.free_bytes, f.total_bytes
        unused = unallocated(f)
        if req is None:
            return []
        if total is not None and req > total:
            return [say("whole_gpu", request=req, total=total)]
        if f.backend == "xpu" and req > 4 << 30:
            return [say("xpu_first", request=req)]
        held = f.reserved_bytes or f.allocated_bytes
        if f.allowed_bytes is not None and held is not None and held + req > f.allowed_bytes:
            room = f", while the GPU had {size(free)} free" if free is not None else ""
            allowed, asked = f.allowed_bytes, held + req
            return [say("fraction", held=held, request=req, sum=asked, allowed=allowed, room=room)]
        if free is None:
            out = [say("free_unknown", request=req)]
        elif free >= req:
            out = [say("in_pieces", request=req, free=free)]
        else:
            out = [say("short", request=req, free=free, short=req - free)]
        if unused and free is not None and free < req:  # (no line for an empty cache)
            name = "fragmented" if unused + free >= req else "too_little"
            out.append(say(name, unused=unused, both=free + unused))
        elif unused:
            out.append(say("cached", unused=unused))
        return out

    def cuda_fix(self, f: Finding) -> list[str]:
        """The allocator setting the message names (or one to try when much is cached),
        whether it can make room here, and the usual fixes."""
        out: list[str] = []
        unused, free, req = unallocated(f), f.free_bytes, f.requested_bytes
        fragmented = unused is not None and unused > max((f.allocated_bytes or 0) * 0.25, 1 << 30)
        conf = f.alloc_conf if unused != 0 else None  # nothing cached: no setting makes room
        here = ""
        if unused is not None and free is not None and req is not None and free < req:
            here = say("here_whole" if free + unused >= req else "here_short")
        runtime = "library(torch)" if "r" in f.context else "python starts"
        held = (f.reserved_bytes or f.allocated_bytes or 0) + (req or 0)
        if f.allowed_bytes and f.allowed_bytes < held:
            out.append(SAY["raise_fraction"])
        elif conf == "expandable_segments" or (fragmented and conf is None):
            lead = "The message suggests" if conf else "Try"
            cmd_ = self.setenv("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
            out.append(say("expandable", lead=lead, cmd=cmd_, here=here, runtime=runtime))
        elif conf == "max_split_size_mb":
            cmd_ = self.setenv("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128")
            out.append(say("max_split", cmd=cmd_, here=here, runtime=runtime))
        out.append(SAY["vllm"] if "vllm" in f.context else SAY["usual"])
        return out

    def xla(self, f: Finding) -> list[str]:
        req, free, total = f.requested_bytes, f.free_bytes, f.total_bytes
        in_use, limit = f.in_use_bytes, f.limit_bytes
        if f.detail == "cpu":
            return indent([say("out_of_ram")])
        why = []
        if f.detail == "tpu_hbm" and in_use and total:
            why.append(say("tpu_hbm", in_use=in_use, total=total))
        elif f.detail == "arguments" and req and limit:
            why.append(say("arguments", request=req, limit=limit))
        elif req:
            of = say("cuda_reported", free=free, total=total) if free and total else ""
            who = "TensorFlow" if f.kind == fk.TF_OOM else "XLA"
            why.append(say("xla_asked", who=who, request=req, free=of))
            if in_use and limit:
                why.append(say("xla_in_use", in_use=in_use, limit=limit))
        if f.detail == "bfc_warning":
            why.append(SAY["bfc_warning"])
        fix = self.section("Fix", self.fixes(f.framework))
        return (self.section("Why it failed", why) if why else []) + fix

    def ggml(self, f: Finding) -> list[str]:
        backend = BACKENDS.get(f.backend or "", "GPU")
        req = f.requested_bytes
        why = say("ggml_asked", backend=backend, request=req) if req else SAY["cuda_runtime"]
        return self.section("Why it failed", [why]) + self.section("Fix", self.fixes("ggml")[:1])

    def sigkill(self, f: Finding) -> list[str]:
        return indent([SAY["killed"]])

    def cpu(self, f: Finding) -> list[str]:
        huge = (f.requested_bytes or 0) > macs.LARGEST_MAC
        wrong = "more than any computer's memory: a wrong shape or size, most likely."
        return indent([*self.notes([wrong] if huge else []), say("out_of_ram")])

    def kill(self, f: Finding) -> list[str]:
        k = f.kill
        assert k is not None
        name = term.visible(k.name or "not known")  # the paste's: never raw to the terminal
        rows = [("process", f"{name} [{k.pid or 'pid not known'}]", "")]
        rows = rows if k.name or k.pid else []
        if k.bytes is not None and k.bytes_are:
            rows.append((k.bytes_are.replace("_", "-"), size(k.bytes), kills.MEANS[k.bytes_are]))
        rows += [(name, size(n), "") for name, n in k.sizes if name != "anon-rss"]
        why = say(KILL_WHY.get(k.reason, "jetsam"), reason=k.reason, largest=name)
        fix = self.section("Fix", [say("kill_fix")])
        return self.aligned(rows) + self.section("Why it failed", [why]) + fix


def unallocated(f: Finding) -> int | None:
    """PyTorch's reserved memory that no tensor used (its cache of freed blocks)."""
    if f.reserved_bytes is None or f.allocated_bytes is None:
        return None
    return max(0, f.reserved_bytes - f.allocated_bytes)


NAMES: dict[str | None, str] = {"torch": "PyTorch's CPU allocator", "numpy": "NumPy"}
NAMES |= {"jax": "JAX", "xla": "its program not named"}
NAMES |= {"tensorflow": "TensorFlow", "mlx": "MLX", "ggml": "llama.cpp", None: "not known"}
BACKENDS = {"cuda": "CUDA", "rocm": "ROCm", "hip": "HIP", "xpu": "XPU"}
OS_NAMES = {"linux": "Linux", "macos": "macOS"}
KILL_WHY = {kills.LINUX_OOM: "oom_killer", kills.CGROUP: "cgroup", kills.SWAP: "swap_out"}
KILL_WHY[kills.JETSAM] = "jetsam_cut"  # (any other reason is macOS's own: "jetsam")
# Each kind's title, and the Renderer method that writes what follows its table of numbers.
KINDS: dict[str, tuple[str, Callable[[Renderer, Finding], list[str]]]] = {
    fk.MPS_OOM: ("MPS out of memory (PyTorch on Apple Silicon)", Renderer.mps_oom),
    fk.MPS_INVALID_LOW: ("Invalid low watermark ratio (PyTorch MPS)", Renderer.watermark),
    fk.MPS_INVALID_HIGH: ("Invalid high watermark ratio (PyTorch MPS)", Renderer.watermark),
    fk.MPS_OTHER: ("MPS memory error", Renderer.mps_other),
    fk.CUDA_OOM: ("CUDA out of memory", Renderer.cuda),
    fk.MLX_OOM: ("MLX out of memory (Metal)", Renderer.mps_other),
    fk.XPU_SIZE: ("XPU allocation over 4 GiB (Intel's extension for PyTorch)", Renderer.mps_other),
    fk.OS_KILL: ("Killed for memory", Renderer.kill),
    fk.SIGKILL: ("Killed (SIGKILL)", Renderer.sigkill),
    fk.XLA_OOM: ("Out of memory in XLA ({framework})", Renderer.xla),
    fk.TF_OOM: ("Out of memory in TensorFlow", Renderer.xla),
    fk.GGML_OOM: ("llama.cpp (ggml) out of memory on {backend}", Renderer.ggml),
    fk.CPU_OOM: ("Out of main memory ({framework})", Renderer.cpu),
}
# The table of each kind's numbers: "label|field (less _bytes)|meaning", a row whose number
# the message lacks left out.
ROWS: dict[str, tuple[str, ...]] = {
    fk.MPS_OOM: (
        "MPS allocated|allocated|PyTorch's MPS allocator: Metal heaps, cache included",
        "other allocations|other|other GPU memory of this process, outside that allocator",
        "requested|requested|the allocation that failed{pool}",
        "max allowed|max_allowed|the cap: watermark ratio x the Mac's recommended max",
    ),
    fk.MPS_OTHER: ("buffer size|requested|the one tensor Metal was asked for",),
    fk.CUDA_OOM: (
        "requested|requested|the allocation that failed",
        "total|total|the GPU's memory",
        "free|free|free on the GPU at that moment",
        "allocated|allocated|held by PyTorch's tensors",
        "reserved|reserved|PyTorch's total: tensors + its cache of freed blocks",
        "in use|in_use|this process's total, PyTorch or not",
        "allowed|allowed|this process's cap (set_per_process_memory_fraction)",
        "private pools|private_pool|of allocated, in CUDA Graphs' pools",
    ),
    fk.MLX_OOM: (
        "requested|requested|the one buffer MLX asked Metal for",
        "max buffer|max_buffer|the largest buffer Metal allows",
    ),
    fk.XPU_SIZE: ("requested|requested|the allocation refused",),
    fk.XLA_OOM: (
        "requested|requested|the allocation that failed",
        "limit|limit|what the allocator may use on the device",
        "in use|in_use|what it held then",
        "free|free|free on the GPU, as CUDA said",
        "total|total|the device's memory",
    ),
    fk.GGML_OOM: ("requested|requested|the buffer the driver refused",),
    fk.CPU_OOM: ("requested|requested|the allocation of main memory that failed",),
}
ROWS[fk.TF_OOM] = ROWS[fk.XLA_OOM]

WIDTH = 88


def _wrap(line: str) -> list[str]:
    """Long prose lines wrapped at WIDTH, continuing at their indent (plus the width of a
    leading "Note: "), a size kept with its unit; colour codes take no width. Table rows
    (columns apart by two spaces) stay whole."""
    shown = compiled(r"\x1b\[[\d;]*m").sub("", line) if "\x1b" in line else line
    body = shown.strip()
    if len(shown) <= WIDTH or "  " in body:
        return [line]
    first = " " * (len(shown) - len(shown.lstrip(" ")))
    more = first + ("      " if body.startswith("Note:") else "")
    # Wrapped without its colour codes, then each line given back its words as coloured.
    lines = term.wrap(
        compiled(r"(?<=\d) (?=(?:bytes|[KMGT]i?B)\b)").sub("\0", body), WIDTH, first, more
    )
    words = iter(line.split())
    return [
        (more if i else first) + " ".join(islice(words, len(w.split())))
        for i, w in enumerate(lines)
    ]


MAX_SHOWN = 20  # a log with more distinct errors is summed up after these


def render(
    findings: list[Finding], limits: Limits | None = None, color: bool = False, more: int = 0
) -> str:
    """The explanation of every finding (the first MAX_SHOWN), separated by blank lines,
    ending in a newline. ``more``: the errors after the findings, counted but not read."""
    r = Renderer(limits, Style(color))
    total = len(findings) + more
    blocks = []
    for i, f in enumerate(findings[:MAX_SHOWN]):
        lines = r.finding(f)
        if total > 1:
            lines[0] = f"{i + 1}/{total}  {lines[0]}"
        blocks.append("\n".join(w for line in lines for w in _wrap(line)))
    if total > MAX_SHOWN:
        listed = f"the first {len(findings)}" if more else "them all"
        blocks.append(f"... and {total - MAX_SHOWN} more errors (--json lists {listed}).")
    return "\n\n".join(blocks) + "\n"
