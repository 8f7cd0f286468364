"""Low-dimensional dynamics: the simplified staircase ODE (:mod:`.ode`, needs the ``dynamics`` extra: diffrax)."""
