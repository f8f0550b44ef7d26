__version__ = "0.5.12"
SCHEMA_VERSION = "1"
