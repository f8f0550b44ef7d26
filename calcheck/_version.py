__version__ = "0.5.1"
SCHEMA_VERSION = "1"
