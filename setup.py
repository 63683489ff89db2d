"""The packages: every package under t2t_repro/ (found, so none can be left out) and the
hparam sets of configs/ as t2t_repro.configs (setup.cfg's package_dir). setup.cfg's
`packages = find:` cannot add that mapped package, so the list is made here; every other
setting is in setup.cfg."""

import setuptools

setuptools.setup(packages=[*setuptools.find_packages(include=["t2t_repro", "t2t_repro.*"]),
                           "t2t_repro.configs"])
