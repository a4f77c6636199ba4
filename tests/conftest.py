import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
# check() records each score in the learner's progress file (course_tools.progress); grading the
# solutions under test is not a learner's work, so the suite (and the notebook kernels it starts) records nothing.
os.environ["COURSE_PROGRESS_FILE"] = ""
