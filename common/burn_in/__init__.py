"""The burn-in family DiCE, GDI and LBC share: the R2D2-style learner, dueling critic, dynamics
tasks and Boltzmann acting."""
