__version__ = "0.5.19"
SCHEMA_VERSION = "1"
