"""``amd.rocal.plugin.tf``: rocAL's TensorFlow iterators, refused: fastload is PyTorch-native
(``plugin.pytorch`` gives torch tensors, ``plugin.generic`` numpy arrays, which TensorFlow takes)."""


def _refused(name: str):
    class Refused:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"fastload.compat.rocal: plugin.tf.{name} is not supported: fastload runs "
                                      f"no TensorFlow iterators; plugin.generic's give numpy arrays, which "
                                      f"TensorFlow takes")
    Refused.__name__ = Refused.__qualname__ = name
    return Refused


ROCALGenericImageIterator = _refused("ROCALGenericImageIterator")
ROCALGenericIteratorDetection = _refused("ROCALGenericIteratorDetection")
ROCALIterator = _refused("ROCALIterator")
ROCAL_iterator = _refused("ROCAL_iterator")
