__version__ = "0.5.13"
SCHEMA_VERSION = "1"
