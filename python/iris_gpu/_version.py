"""The package version (the iris release it binds: IRIS_VERSION of iris.h)."""
__version__ = "0.2.0"
