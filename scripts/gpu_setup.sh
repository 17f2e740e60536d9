# Source on a lent GPU machine (device tool): installs carried wheels, points at carried data.
# Before the call, here: `git rev-parse HEAD > .git-sha` (carried with .whl and data/raw).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DATALENS_DATA_DIR=$PWD/data/raw
if [ -f .git-sha ]; then export DATALENS_GIT_SHA=$(cat .git-sha); fi  # (the last status counts)
