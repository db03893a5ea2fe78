# The MSLK API level this package implements (spec: MSLK 1.3.0). Bump with releases.
__version__ = "1.3.0"
