"""ssldyn.data"""
