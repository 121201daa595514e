"""The mechanism registry: ``--mechanism NAME`` -> a ``Mechanism`` plug-in (see ``base``)."""

from __future__ import annotations

from gpumosaic.errors import InputError
from gpumosaic.mechanisms.contract import Mechanism, PolicyKind, RunParts
from gpumosaic.mechanisms.event.plugin import EventMechanism
from gpumosaic.mechanisms.gandiva.plugin import GandivaMechanism
from gpumosaic.mechanisms.rounds.plugin import RoundsMechanism

# The order matters for ``--mechanism auto``: the first whose policy kind knows --policy.
MECHANISMS: dict[str, Mechanism] = {
    "event": EventMechanism(),
    "rounds": RoundsMechanism(),
    "gandiva": GandivaMechanism(),
}


def mechanism_names() -> tuple[str, ...]:
    return tuple(MECHANISMS)


def get_mechanism(name: str) -> Mechanism:
    try:
        return MECHANISMS[name]
    except KeyError:
        known = ", ".join(("auto", *MECHANISMS))
        raise InputError(
            f"unknown mechanism {name!r} (known: {known})", field="--mechanism"
        ) from None


def register_mechanism(mechanism: Mechanism) -> None:
    """Add (or replace) a mechanism under its name; ``auto`` tries it after the others."""
    MECHANISMS[mechanism.name] = mechanism


def policy_names(kind: PolicyKind) -> tuple[str, ...]:
    """The ``--policy`` names of one kind."""
    if kind is PolicyKind.QUEUE_ORDER:
        from gpumosaic.policies.ordering import QUEUE_ORDERS

        return tuple(QUEUE_ORDERS)
    from gpumosaic.policies.registry import POLICY_NAMES

    return POLICY_NAMES


def knows_policy(kind: PolicyKind, name: str) -> bool:
    if kind is PolicyKind.QUEUE_ORDER:
        return name.strip().lower() in policy_names(kind)
    return name in policy_names(kind)


def auto_mechanism(policy: str) -> str:
    """``--mechanism auto``: the first mechanism whose policy kind knows ``policy``; a
    name no kind knows goes to the rounds (which report it as an unknown policy)."""
    for name, mechanism in MECHANISMS.items():
        if knows_policy(mechanism.policy_kind, policy):
            return name
    return "rounds"


__all__ = [
    "MECHANISMS",
    "Mechanism",
    "PolicyKind",
    "RunParts",
    "auto_mechanism",
    "get_mechanism",
    "knows_policy",
    "mechanism_names",
    "policy_names",
    "register_mechanism",
]
