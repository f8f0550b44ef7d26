__version__ = "0.5.16"
SCHEMA_VERSION = "1"
