"""What a result costs where the config sets a price per device-hour (`price_per_hour`, per device kind): per
experiment, the cost of a million training images at its steady throughput, with the interval of that throughput
(cost is price over throughput, so the throughput's upper bound gives the cost's lower one), and the cost of training
to the target accuracy (price times the mean time to target over the repeats that reached it, with that mean's
interval). A GPU experiment on N replicas holds N devices; a CPU
experiment holds the machine once. Without any price set no cost column is added, so the tables carry none.
"""

import pandas as pd

COST_COLUMNS = [
    "price_per_hour",
    "cost_per_million_images",
    "cost_per_million_images_ci95_low",
    "cost_per_million_images_ci95_high",
    "cost_to_target",
    "cost_to_target_ci95_low",
    "cost_to_target_ci95_high",
]


def hourly_price(summary, prices):
    """Each experiment's price per hour: its device kind's price, times its replicas on GPU (NaN where unpriced)."""
    price = summary["device"].map(lambda device: prices.get(device)).astype(float)
    devices = summary["replicas"].astype(float).where(summary["device"] == "gpu", 1.0)
    return price * devices


def with_costs(summary, prices):
    """The summary with COST_COLUMNS beside energy per image, where `prices` ({device: price or None}) sets any; the
    summary as it is otherwise."""
    if not any(price is not None for price in (prices or {}).values()):
        return summary
    price = hourly_price(summary, prices)
    per_image = price / 3600 * 1e6  # the price of the seconds a million images take at one image per second
    costs = pd.DataFrame(
        {
            "price_per_hour": price,
            "cost_per_million_images": per_image / summary["train_images_per_s_gmean"],
            "cost_per_million_images_ci95_low": per_image / summary["train_images_per_s_ci95_high"],
            "cost_per_million_images_ci95_high": per_image / summary["train_images_per_s_ci95_low"],
            "cost_to_target": price / 3600 * summary["time_to_target_s_mean"],
            "cost_to_target_ci95_low": price / 3600 * summary["time_to_target_s_ci95_low"],
            "cost_to_target_ci95_high": price / 3600 * summary["time_to_target_s_ci95_high"],
        },
        index=summary.index,
    )
    at = summary.columns.get_loc("gpu_energy_per_image_j_mean") + 1
    return pd.concat([summary.iloc[:, :at], costs, summary.iloc[:, at:]], axis=1)
