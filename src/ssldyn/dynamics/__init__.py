"""ssldyn.dynamics"""
