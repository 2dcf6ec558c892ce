"""echotk.train: tensor-parallel training of a small Llama on one device, P ranks emulated
(`python -m echotk train`, docs/python-training.md).

- echotk.train.model: ModelConfig and TPLlama, a Llama built from echotk.nn's layers
- echotk.train.data: the token ids of data/training (`python -m echotk.train.data` makes them)
- echotk.train.batches: the order of the training sequences, validation batches, learning rates
- echotk.train.trainer: the training loop and its run folder
- echotk.train.command: the command's options (`python -m echotk train`)
- echotk.train.summary: the validation summary of run folders (`python -m echotk.train.summary`)

The package imports none of them itself, so that `python -m echotk.train.data` and
`python -m echotk.train.summary` run their module once.
"""
