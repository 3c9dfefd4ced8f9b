"""ssldyn.viz"""
