"""Node scorers of the FGD and PWR evaluations, one small module each, and the class that
combines them into a placement strategy (``combined.ScoredPlacement``)."""

from gpumosaic.placement.scorers.base import Scorer
from gpumosaic.placement.scorers.bestfit import BestFitScorer
from gpumosaic.placement.scorers.combined import Member, ScoredPlacement
from gpumosaic.placement.scorers.dotprod import DotProdScorer
from gpumosaic.placement.scorers.fgd import FgdScorer
from gpumosaic.placement.scorers.firstfit import FirstFitScorer
from gpumosaic.placement.scorers.gpuclustering import GpuClusteringScorer
from gpumosaic.placement.scorers.gpupacking import GpuPackingScorer
from gpumosaic.placement.scorers.pwr import PwrScorer
from gpumosaic.placement.scorers.random import RandomPlacement
from gpumosaic.placement.scorers.worstfit import WorstFitScorer

__all__ = [
    "BestFitScorer",
    "DotProdScorer",
    "FgdScorer",
    "FirstFitScorer",
    "GpuClusteringScorer",
    "GpuPackingScorer",
    "Member",
    "PwrScorer",
    "RandomPlacement",
    "ScoredPlacement",
    "Scorer",
    "WorstFitScorer",
]
