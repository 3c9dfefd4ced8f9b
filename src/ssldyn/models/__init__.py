"""ssldyn.models"""
