"""What a job is to the live runtime: the one validated submission and its states
(``submission``), and the checks every submission passes (``admission``)."""
