"""ssldyn.probes"""
