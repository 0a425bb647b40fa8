"""``amd.rocal.reductions``: empty in rocAL too (rocAL_pybind/amd/rocal/reductions.py holds only its
licence); kept so that scripts importing it run."""
