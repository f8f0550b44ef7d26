__version__ = "0.5.15"
SCHEMA_VERSION = "1"
