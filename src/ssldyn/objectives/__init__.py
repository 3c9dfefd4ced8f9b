"""ssldyn.objectives"""
