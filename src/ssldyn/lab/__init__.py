"""ssldyn.lab"""
