__version__ = "0.5.8"
SCHEMA_VERSION = "1"
