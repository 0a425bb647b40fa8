"""fastload packaging: kernels/ is installed as the subpackage fastload.kernels."""

from setuptools import setup

setup(
    name="fastload",
    version="0.1.0",
    description="A drop-in, thread-based torch DataLoader for image training",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=["fastload", "fastload.kernels"],
    package_dir={"fastload": "fastload", "fastload.kernels": "kernels"},
    install_requires=["torch==2.14.1", "torchvision==0.29.1", "numpy", "pillow", "tqdm"],
    extras_require={"test": ["pytest", "pytest-timeout"]},
)
