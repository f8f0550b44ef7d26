__version__ = "0.10.1"
SCHEMA_VERSION = "1"
