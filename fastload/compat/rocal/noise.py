"""``amd.rocal.noise``: empty in rocAL too (rocAL_pybind/amd/rocal/noise.py holds only its licence); kept so that
scripts importing it run."""
