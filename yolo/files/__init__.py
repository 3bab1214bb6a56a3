"""Small file jobs done one way everywhere: atomic writes, ``.names`` files, images."""
