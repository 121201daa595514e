from gpumosaic.engine.core import Engine


def test_events_run_by_time_then_priority_then_sequence() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.schedule(5.0, lambda: seen.append("t5"))
    engine.schedule(1.0, lambda: seen.append("t1-p2"), priority=2)
    engine.schedule(1.0, lambda: seen.append("t1-p0-a"), priority=0)
    engine.schedule(1.0, lambda: seen.append("t1-p0-b"), priority=0)
    engine.run()
    assert seen == ["t1-p0-a", "t1-p0-b", "t1-p2", "t5"]
    assert engine.now == 5.0
    assert engine.events_processed == 4


def test_cancelled_events_do_not_run_and_handlers_may_schedule() -> None:
    engine = Engine()
    seen: list[float] = []
    handle = engine.schedule(2.0, lambda: seen.append(-1.0))
    handle.cancel()

    def chain() -> None:
        seen.append(engine.now)
        if engine.now < 3:
            engine.schedule(engine.now + 1, chain)

    engine.schedule(1.0, chain)
    engine.run()
    assert seen == [1.0, 2.0, 3.0]
    assert len(engine) == 0


def test_run_until_stops_before_later_events() -> None:
    engine = Engine()
    seen: list[int] = []
    engine.schedule(1.0, lambda: seen.append(1))
    engine.schedule(10.0, lambda: seen.append(10))
    engine.run(until=5.0)
    assert seen == [1]
    assert engine.now == 5.0
    assert engine.peek() == 10.0


def test_scheduling_in_the_past_is_refused() -> None:
    engine = Engine(start=3.0)
    try:
        engine.schedule(2.0, lambda: None)
    except ValueError as err:
        assert "before now" in str(err)
    else:
        raise AssertionError("expected ValueError")
