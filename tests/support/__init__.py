"""What the tests share: readable test data (``builders``), real processes (``processes``,
``live``), the PostgreSQL server (``postgres``), HTTP steps of the API tests (``http``), the
lock witness, and the two pytest plugins (``fault_matrix``, ``scenario_report``)."""
