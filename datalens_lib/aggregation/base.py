"""The aggregator interface: how DataLens (paper Alg. 1) turns the teachers' per-query gradients
into one private update direction, so that TopAgg (Alg. 3), D2P-Fed (Algs. 7-8) and FetchSGD
(Alg. 9) run in the same training loop (``tab:compression``, appendix "Adapting other gradient
compression algorithms").

An aggregator works in three phases per generator step of Q queries:

1. ``context(d, generator, device)``: public randomness shared by all teachers of the step
   (D2P-Fed's random rotation); drawn independently of the data.
2. ``partial(grads, ctx, generator)``: the teachers' compressed votes summed over one chunk of
   teachers, grads [Q, n, d] -> a statistic [Q, m]. Statistics of disjoint chunks add up, so
   an ensemble too large for memory is processed chunk by chunk.
3. ``release(stat, ctx, n_teachers, generator)``: the private release (Gaussian noise of
   standard deviation ``sigma``) and its post-processing, -> (output [Q, d], noisy statistic).

Privacy. Neighbouring datasets differ by replacing one record (with its label kept under the
official class-ordered split: ``data.partition.NEIGHBOURING``); partitions are disjoint, so one
record changes one teacher's compressed vote vector and nothing else. ``sensitivity(d, n)`` is
the L2 sensitivity of the noised statistic to that change, maximised over everything the
teacher's compressor can output (the randomness of the other teachers held fixed): each query
is a Gaussian mechanism with noise multiplier sigma / sensitivity, composed over queries
(``dp_event``; ledger ``privacy.gaussian.CompressorAccountant``). ``charged_sensitivity`` is
what the official code charges per query (the ``paper`` ledger); where it differs from the
sound value the book says which one is a DP guarantee (always the sound one).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import dp_accounting
import torch

#: Every aggregator a config can name (``TrainConfig.aggregator``).
AGGREGATORS = ("topagg", "d2pfed-coded", "d2pfed-paper", "fetchsgd-coded", "fetchsgd-sound")


def check_grads(grads: torch.Tensor) -> torch.Tensor:
    """``grads`` must be a non-empty floating [Q, N, d] tensor (queries, teachers,
    dimensions)."""
    if not isinstance(grads, torch.Tensor):
        raise ValueError(f"grads must be a torch.Tensor, got {type(grads).__name__}")
    if grads.dim() != 3:
        raise ValueError(f"grads must have shape [Q, N, d] (queries, teachers, dims); "
                         f"got {tuple(grads.shape)}")
    if not grads.is_floating_point():
        raise ValueError(f"grads must be a floating-point tensor, got {grads.dtype}")
    if grads.numel() == 0:
        raise ValueError(f"grads must be non-empty (at least one query, teacher and "
                         f"dimension); got shape {tuple(grads.shape)}")
    return grads


def threshold_votes(noisy: torch.Tensor, beta: float, n_teachers: int) -> torch.Tensor:
    """Phase III of Algs. 3, 8 and 9 (post-processing): +1 where noisy >= beta N, -1 where
    noisy <= -beta N, 0 elsewhere."""
    tau = beta * n_teachers
    return (noisy >= tau).to(torch.int8) - (noisy <= -tau).to(torch.int8)


class Aggregator(ABC):
    """A private gradient aggregator (see module doc). Subclasses are frozen dataclasses with
    a ``sigma`` field (standard deviation of the Gaussian noise)."""

    sigma: float
    name: str = ""

    def context(self, d: int, generator: torch.Generator | None,
                device: torch.device | str = "cpu") -> Any:
        """Public randomness of one step (none by default)."""
        return None

    @abstractmethod
    def partial(self, grads: torch.Tensor, ctx: Any,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Summed compressed votes of one chunk of teachers: [Q, n, d] -> [Q, m]."""

    @abstractmethod
    def release(self, stat: torch.Tensor, ctx: Any, n_teachers: int,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Noise and post-processing of the summed statistic: (output [Q, d], noisy)."""

    @abstractmethod
    def sensitivity(self, d: int, n_teachers: int) -> float:
        """Sound L2 sensitivity of the noised statistic to one teacher's votes."""

    def charged_sensitivity(self, d: int, n_teachers: int) -> float:
        """The L2 sensitivity the official code's ledger assumes (the ``paper`` ledger)."""
        return self.sensitivity(d, n_teachers)

    def charge_is_sound(self, d: int, n_teachers: int) -> bool:
        """Whether the official charge (the ``paper`` ledger) is at least the sound
        sensitivity, i.e. whether that ledger is a DP guarantee."""
        sound, charged = self.sensitivity(d, n_teachers), self.charged_sensitivity(d, n_teachers)
        return charged >= sound * (1 - 1e-12)

    def describe(self, d: int, n_teachers: int,
                 ledgers: tuple[str, ...] = ("paper", "rdp", "pld")) -> dict[str, Any]:
        """The privacy facts of this aggregator for ``run.json`` (subclasses add the
        mechanism's name and the reasoning); ``ledgers``: the data-independent ones the run's
        record holds (``pld`` is skipped below ``PLD_MIN_Z``). ``dp_ledgers`` lists those that
        are a DP guarantee: all of them, less ``paper`` where it charges less than the sound
        sensitivity."""
        sound, charged = self.sensitivity(d, n_teachers), self.charged_sensitivity(d, n_teachers)
        ok = self.charge_is_sound(d, n_teachers)
        dp = [c for c in ledgers if ok or c != "paper"]
        held = ", ".join(dp)
        return {
            "mechanism": self.name,
            "sensitivity": f"L2 {sound:.6g} per query (sound; see datalens_lib.aggregation."
                           f"{type(self).__module__.rsplit('.', 1)[-1]})",
            "accountant": f"paper: Gaussian RDP with the official charge (sensitivity "
                          f"{charged:.6g}), Mironov Prop. 3 on the official orders; rdp, pld: "
                          f"the sound sensitivity, dp-accounting",
            "dp_guarantee": f"epsilon under {held}" if ok else
                            f"epsilon under {held} only: the paper ledger charges less "
                            "than the sound sensitivity and is NOT a DP guarantee",
            "dp_ledgers": dp,
        }

    def noise_multiplier(self, d: int, n_teachers: int, *, charged: bool = False) -> float:
        s = (self.charged_sensitivity if charged else self.sensitivity)(d, n_teachers)
        return self.sigma / s

    def dp_event(self, d: int, n_teachers: int, queries: int) -> dp_accounting.DpEvent:
        """``queries`` sound Gaussian queries as a dp_accounting event."""
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.GaussianDpEvent(self.noise_multiplier(d, n_teachers)), queries)

    def __call__(self, grads: torch.Tensor, generator: torch.Generator | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """All three phases on [Q, N, d] in one call: (output, clean statistic, noisy)."""
        grads = check_grads(grads)
        ctx = self.context(grads.shape[-1], generator, grads.device)
        stat = self.partial(grads, ctx, generator)
        out, noisy = self.release(stat, ctx, grads.shape[1], generator)
        return out, stat, noisy

