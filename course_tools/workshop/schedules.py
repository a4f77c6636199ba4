"""Three workshop schedules — a 3-hour taster, a full day, two days — built from the lessons' minutes.

A plan lists blocks in order: a lesson (its ``teaching_minutes``), an exercise (the minutes its
notebook states, ``lessons.exercise_minutes``), breaks, an opening and a closing of stated length. ``build`` turns a plan
into timed rows and fills what is left of the day with one "questions, catch-up" block, so the
minutes add up to the day's length exactly; a plan whose blocks do not fit raises ValueError.

Practice follows teaching: a lesson that has an exercise is followed at once by one of them, unless the
plan says why not (``exercise_later``: the reason is printed in the guide); ``misplaced_exercises`` lists
every break of that rule and the test suite requires none.
"""

from dataclasses import dataclass

from course_tools.workshop.lessons import Lesson


@dataclass(frozen=True)
class Block:
    kind: str  # "lesson", "exercise", "break", "opening", "closing"
    what: str  # a notebook stem for a lesson, an exercise id for an exercise, else the block's text
    minutes: int | None = None  # None: taken from the lesson's metadata


@dataclass(frozen=True)
class Plan:
    name: str
    days: tuple[tuple[Block, ...], ...]
    minutes_per_day: int
    start: str = "09:00"
    exercise_later: tuple[tuple[str, str], ...] = ()  # (lesson stem, why its exercise does not follow it here)


@dataclass(frozen=True)
class Row:
    day: int
    start: str  # "HH:MM"
    minutes: int
    kind: str
    what: str


def lesson(stem: str) -> Block:
    return Block("lesson", stem)


def exercise(exercise_id: str) -> Block:
    return Block("exercise", exercise_id)


def pause(minutes: int, what: str = "break") -> Block:
    return Block("break", what, minutes)


# A room of laptops: 25 minutes, because the set-up check finds someone without the kernel, the wheel or the
# Wi-Fi in every room, and fixing that while the others wait is the opening's real job.
OPENING = Block("opening", "welcome, set-up check (`python -m course_tools.doctor`) and fixes, the canteen picture", 25)
CLOSING = Block("closing", "key points, interview check, feedback", 15)
LUNCH = pause(60, "lunch")

PLANS = (
    Plan("3-hour taster", minutes_per_day=180, days=((
        Block("opening", "welcome (participants ran `python -m course_tools.doctor` beforehand)", 5),
        lesson("01_the_bottleneck"), exercise("ex01_softmax_attention"), pause(10),
        lesson("02_blackboard_associativity"), exercise("ex02_linear_attention"), lesson("11_explorer"),
        Block("closing", "key points, feedback; the ledger (05) as the next step", 5)),)),
    Plan("full day", minutes_per_day=480, days=((  # the core path: the bottleneck to the ledger
        OPENING, lesson("01_the_bottleneck"), exercise("ex01_softmax_attention"), pause(15),
        lesson("02_blackboard_associativity"), exercise("ex02_linear_attention"), LUNCH,
        lesson("03_kernel_trick"), exercise("ex03_positive_random_features"), lesson("04_two_blackboards"),
        pause(15), lesson("05_the_ledger"), exercise("ex05_causal_linear_attention"), CLOSING),)),
    Plan("two days", minutes_per_day=480, days=(
        (OPENING, lesson("01_the_bottleneck"), exercise("ex01_softmax_attention"), lesson("02_blackboard_associativity"),
         exercise("ex02_linear_attention"), pause(15), lesson("03_kernel_trick"),
         exercise("ex03_positive_random_features"), LUNCH, lesson("04_two_blackboards"), lesson("05_the_ledger"),
         exercise("ex05_causal_linear_attention"), CLOSING),
        (Block("opening", "recap of day 1, questions", 15), lesson("06_price_of_the_summary"),
         exercise("ex04_orthogonal_gaussian"), pause(15), lesson("07_order_of_dishes"), exercise("ex07_rope"), LUNCH,
         lesson("08_when_it_pays"), exercise("ex10_crossover"), pause(15), lesson("12_what_the_ledger_remembers"),
         exercise("ex11_delta_rule"), lesson("10_interview_quiz"), exercise("ex08_interview_quiz"), CLOSING),
    )),
)
# In no plan, for reading after a workshop: 03b and 05b (appendices), 09 (its 43 min did not fit day 2) and
# 13 with ex12 and ex13 (the gated ledger and its exercises did not fit day 2 either).


def misplaced_exercises(plan: Plan, lessons: dict[str, Lesson]) -> list[str]:
    """Where ``plan`` breaks "practice follows teaching": a lesson with exercises not followed by one of
    them (unless ``plan.exercise_later`` says why), or an exercise that does not follow its own lesson."""
    later = dict(plan.exercise_later)
    found = []
    for day, blocks in enumerate(plan.days, start=1):
        for before, block in zip((None, *blocks), (*blocks, None)):
            if before is not None and before.kind == "lesson" and lessons[before.what].exercises \
                    and before.what not in later and not (block and block.kind == "exercise"
                                                          and block.what in lessons[before.what].exercises):
                found.append(f"{plan.name}, day {day}: {before.what} is not followed by its exercise "
                             f"({', '.join(lessons[before.what].exercises)})")
            if block is not None and block.kind == "exercise" and not (
                    before and before.kind == "lesson" and block.what in lessons[before.what].exercises):
                found.append(f"{plan.name}, day {day}: {block.what} does not come right after its lesson")
    return found


def _minutes(block: Block, lessons: dict[str, Lesson], exercises: dict[str, int]) -> int:
    if block.minutes is not None:
        return block.minutes
    known = lessons if block.kind == "lesson" else exercises
    if block.what not in known:
        raise ValueError(f"schedule block {block.kind} {block.what!r}: no such {block.kind}")
    return lessons[block.what].teaching_minutes if block.kind == "lesson" else exercises[block.what]


def _clock(start: str, minutes: int) -> str:
    hours, mins = map(int, start.split(":"))
    total = hours * 60 + mins + minutes
    return f"{total // 60:02d}:{total % 60:02d}"


def build(plan: Plan, lessons: dict[str, Lesson], exercises: dict[str, int]) -> list[Row]:
    """The plan's timed rows; each day ends with slack ("questions, catch-up") so it lasts exactly
    ``minutes_per_day``. ValueError if a day's blocks need more than that."""
    rows = []
    for day, blocks in enumerate(plan.days, start=1):
        spent = 0
        timed = [(block, _minutes(block, lessons, exercises)) for block in blocks]
        need = sum(minutes for _, minutes in timed)
        if need > plan.minutes_per_day:
            raise ValueError(f"{plan.name}, day {day}: the blocks need {need} min, the day has {plan.minutes_per_day}")
        slack = plan.minutes_per_day - need
        if slack:  # before the day's closing block, or at its end
            closing = [i for i, (block, _) in enumerate(timed) if block.kind == "closing"]
            timed.insert(closing[-1] if closing else len(timed), (Block("slack", "questions, catch-up, buffer"), slack))
        for block, minutes in timed:
            rows.append(Row(day, _clock(plan.start, spent), minutes, block.kind, block.what))
            spent += minutes
    return rows
