"""The project's exception hierarchy: every user-facing failure is a MorelloError."""


class MorelloError(Exception):
    """Base class of errors morello reports to users as one clear line."""


class SpecError(MorelloError, ValueError):
    """A Spec or TensorSpec violates an invariant (bad size, dtype, level...)."""


class RewriteError(MorelloError):
    """A rewrite's precondition does not hold for the Spec it was applied to."""


class BuildError(MorelloError):
    """The host C compiler is missing or failed, or a built kernel misbehaved."""


class DatabaseError(MorelloError):
    """A memo database file is unwritable, corrupt, or for another target/version."""
