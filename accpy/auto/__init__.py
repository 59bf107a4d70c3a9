"""Automatic schedules: `acc.autoschedule(nest, args)` builds a legal, fast plan from the nest alone.

The layer reads the nest as the compiler does and decides as a performance engineer would:

  bands.py     the polyhedral first step: exact dependence directions (analysis/directions.py) give
               permutable bands, coincident (parallel) loops and the skews that make a band tileable
  kernel.py    what the nest computes: its arrays, their strides per index, a contraction's roles
  recipe.py    a schedule and plan written down as data (splits, order, caches, vector, unroll,
               parallel), applied through the public API, so every step passes accpy's own checks
  model.py     the cost model: candidate recipes from the bands, the footprints and the target
               (its caches and vector ISA), each with an estimate (estimate.py: a roofline over
               the cache levels)
  library_recipes.py  the recipes the target libraries propose (`TargetLibrary.schedule_recipes`:
               dot products, the x86 tile unit, Gemmini), the model's per-target part
  search.py    the best few candidates measured with `acc.tune` within a time budget; results kept
               per (nest signature, target) in the build cache
  explain.py   `plan.explain()`: what was found and chosen, and why, in a few lines
"""
