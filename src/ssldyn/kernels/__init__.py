"""ssldyn.kernels"""
