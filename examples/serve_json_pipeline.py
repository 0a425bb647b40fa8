"""Serve a classifier behind a rocAL JSON preprocessing pipeline, from Python, and ask it about an image.

    python examples/serve_json_pipeline.py [IMAGE]

The same as `fastload serve --pipeline p.json --model resnet18 --port 0`, with the pieces by name:
JsonPipeline (rocAL's inference-server format), load_model (torchvision; random weights unless given a
state_dict file, nothing downloaded) and InferenceServer (batches concurrent requests for the model).
"""

import http.client
import io
import json
import sys

from fastload.compat.rocal import JsonPipeline
from fastload.sample_data import make_image
from fastload.serve import InferenceServer, load_model

PIPELINE = {"pipeline": [
    {"operation": "Resize", "dest_width": 256, "dest_height": 256},
    {"operation": "CropMirrorNormalize", "crop_height": 224, "crop_width": 224, "start_x": 0.5, "start_y": 0.5,
     "mean": [123.675, 116.28, 103.53], "std_dev": [58.395, 57.12, 57.375], "output_dtype": "float32",
     "is_output": True}]}


def main() -> None:
    if len(sys.argv) > 1:
        with open(sys.argv[1], "rb") as file:
            image = file.read()
    else:
        buffer = io.BytesIO()
        make_image(0, 500, 375).save(buffer, "JPEG")
        image = buffer.getvalue()
    with InferenceServer(JsonPipeline(PIPELINE), load_model("resnet18"), port=0, max_batch=16,
                         name="resnet18") as server:
        connection = http.client.HTTPConnection(server.host, server.port)
        connection.request("POST", "/predict", body=image)
        answer = json.loads(connection.getresponse().read())
        connection.request("GET", "/health")
        health = json.loads(connection.getresponse().read())
        connection.close()
    print(f"server on port {server.port}: {health}")
    if "top5" not in answer:  # a 4xx: the server says why
        raise SystemExit(f"the server refused the image: {answer['error']}")
    print("top-5:", ", ".join(f"class {c['class']} ({c['probability']:.3f})" for c in answer["top5"]))


if __name__ == "__main__":
    main()
