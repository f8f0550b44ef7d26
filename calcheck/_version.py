__version__ = "0.5.10"
SCHEMA_VERSION = "1"
