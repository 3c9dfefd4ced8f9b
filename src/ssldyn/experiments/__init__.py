"""ssldyn.experiments"""
