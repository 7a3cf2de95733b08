"""Files that ship with the package (the tiny tokenizer) and the scripts that make them."""
