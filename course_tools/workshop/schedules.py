"""Three workshop schedules — a 3-hour taster, a full day, two days — built from the lessons' minutes.

A plan lists blocks in order: a lesson (its ``teaching_minutes``), an exercise (the minutes its
notebook states, ``lessons.exercise_minutes``), breaks, an opening and a closing of stated length. ``build`` turns a plan
into timed rows and fills what is left of the day with one "questions, catch-up" block, so the
minutes add up to the day's length exactly; a plan whose blocks do not fit raises ValueError.
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


OPENING = Block("opening", "welcome, set-up check (`python -m course_tools.doctor`), the canteen picture", 15)
CLOSING = Block("closing", "key points, interview check, feedback", 15)
LUNCH = pause(60, "lunch")

PLANS = (
    Plan("3-hour taster", minutes_per_day=180, days=((
        Block("opening", "welcome (participants ran `python -m course_tools.doctor` beforehand)", 5),
        lesson("01_the_bottleneck"), lesson("02_blackboard_associativity"), exercise("ex02_linear_attention"),
        pause(10), lesson("05_the_ledger"), exercise("ex05_causal_linear_attention"),
        Block("closing", "key points, feedback", 5)),)),
    Plan("full day", minutes_per_day=480, days=((
        OPENING, lesson("01_the_bottleneck"), exercise("ex01_softmax_attention"), pause(15),
        lesson("02_blackboard_associativity"), exercise("ex02_linear_attention"), LUNCH,
        lesson("03_kernel_trick"), lesson("04_two_blackboards"), pause(15), lesson("05_the_ledger"),
        exercise("ex05_causal_linear_attention"), lesson("08_when_it_pays"), CLOSING),)),
    Plan("two days", minutes_per_day=480, days=(
        (OPENING, lesson("01_the_bottleneck"), exercise("ex01_softmax_attention"), lesson("02_blackboard_associativity"),
         exercise("ex02_linear_attention"), pause(15), lesson("03_kernel_trick"),
         exercise("ex03_positive_random_features"), LUNCH, lesson("04_two_blackboards"),
         lesson("06_price_of_the_summary"), pause(15), lesson("05_the_ledger"), exercise("ex05_causal_linear_attention"),
         CLOSING),
        (Block("opening", "recap of day 1, questions", 15), lesson("07_order_of_dishes"), exercise("ex07_rope"),
         pause(15), lesson("08_when_it_pays"), exercise("ex10_crossover"), LUNCH, lesson("09_five_misconceptions"),
         lesson("12_what_the_ledger_remembers"), pause(15), exercise("ex11_delta_rule"),
         lesson("10_interview_quiz"), exercise("ex08_interview_quiz"), CLOSING),
    )),
)


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
